# Shared by tools/gpu_proof and tools/gpu_ab (sourced, not run): steps that log, time and
# keep going, with their results packed for the device tool after every step.
# Before sourcing, set: out (the results folder, absolute), and optionally pack_exclude (a
# name under it left out of the archive) and tail_default (lines of each log printed; the
# TAIL environment variable overrides it). The archive is $OUT/$(basename "$out").tgz, when
# $OUT is set (the device tool returns at most 8 files); the exit status is 1 when a step
# failed (they are listed).
mkdir -p "$out"
export PYTHONUNBUFFERED=1
failed=""
pack() {  # atomically: a kill mid-pack keeps the last archive
  local name; name=$(basename "$out")
  [ -z "${OUT:-}" ] || { tar czf "$OUT/.$name.tgz.tmp" ${pack_exclude:+--exclude="$pack_exclude"} \
    -C "$out/.." "$name" && mv "$OUT/.$name.tgz.tmp" "$OUT/$name.tgz"; }
}
finish() { pack; [ -z "$failed" ] || { echo "== failed steps:$failed"; exit 1; }; }
trap finish EXIT
step() {  # step NAME COMMAND...: run, log, time, keep going
  local name=$1; shift
  local t0=$SECONDS
  "$@" >"$out/$name.log" 2>&1
  local rc=$?
  echo "== $name: rc=$rc, $((SECONDS - t0)) s"
  [ "$rc" -eq 0 ] || failed="$failed $name"
  tail -n "${TAIL:-${tail_default:-6}}" "$out/$name.log"
  pack
}
install_dev() {  # the repository in the current directory, installed as the README's
                 # `tools/dev fuzz|test` install it (its .venv, reusing python3's torch); the
                 # venv's bin then leads PATH, so python3 and diagfuzz in later steps are its
  local venv
  venv=$(tools/dev env 2>"$out/install.log") || { cat "$out/install.log"; exit 3; }
  cat "$out/install.log"
  export PATH="$venv/bin:$PATH"
}
install_here() {  # the source tree in the current directory into python3, editable, offline
                  # (tools/gpu_ab: each snapshot in turn)
  python3 -m pip install -q --no-deps --no-build-isolation -e . >"$out/install.log" 2>&1 \
    || { cat "$out/install.log"; exit 3; }
}
