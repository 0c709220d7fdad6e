#!/usr/bin/env bash
# Download, on a machine with network, the wheels examples/flaggems.py needs on the GPU
# machine (Python 3.12, x86_64, no network; it has torch 2.11, triton 3.6, numpy 2.x,
# packaging, PyYAML and typing_extensions): FlagGems 5.0.2 and the one dependency its import
# needs that the GPU machine lacks, SQLAlchemy. SQLAlchemy's greenlet serves only its asyncio
# API, which FlagGems does not use: its import works without it.
#
#   examples/fetch_wheels.sh            # writes .whl/ at the repository root
#
# Then on the GPU machine:
#
#   pip install --no-deps --no-index .whl/*.whl
#
# --no-deps everywhere: flag-gems pins torch, numpy and packaging versions, and pip would
# replace the GPU machine's torch and numpy to meet them.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"
dest=.whl

# .whl/ stays out of git: ignored already (.gitignore), or ignored here by the repository's
# exclude file.
if ! git check-ignore -q "$dest/x.whl"; then
  exclude="$(git rev-parse --git-path info/exclude)"
  mkdir -p "$(dirname "$exclude")"
  echo "/$dest/" >>"$exclude"
fi
mkdir -p "$dest"

pip_download=("$python" -m pip download --disable-pip-version-check --no-deps
              --only-binary=:all: --python-version 3.12 --implementation cp -d "$dest")
# Pure Python: one wheel for every platform.
"${pip_download[@]}" flag-gems==5.0.2
# Compiled (a C extension): the manylinux wheel for CPython 3.12 on x86_64.
"${pip_download[@]}" --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 sqlalchemy==2.0.48

ls -l "$dest"
du -ch "$dest"/*.whl | tail -n 1
