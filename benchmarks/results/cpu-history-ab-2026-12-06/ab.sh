#!/bin/bash
# plain PyTorch's default gate, base (c78e193) and head alternated, CPU, -n 2.
for round in 1 2; do
  for side in base head; do
    d=/tmp/ab6-$side-$round; rm -rf $d; mkdir -p $d; cd $d
    if [ $side = base ]; then src=/tmp/basepkgs:/work/main/.base; else src=/tmp/headpkgs:/work/main; fi
    t0=$(date +%s.%N)
    PYTHONPATH=$src /work/main/.venv/bin/python -m diagfuzz gate --impl examples.plain_torch:impl -n 2 --no-save --ops diagonal,diagonal_backward,diag_embed,diagonal_scatter,diag,diag_1d --report r.json > log.txt 2>&1
    rc=$?
    t1=$(date +%s.%N)
    echo "$side round $round rc=$rc wall=$(python3 -c "print(f'{$t1-$t0:.1f}')") findings=$(python3 -c "import json;print(len(json.load(open('r.json'))['findings']))")"
  done
done
