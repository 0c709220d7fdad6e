#!/usr/bin/env python3
"""diagfuzz reproducer: mismatch in diagonal(sizes=[4, 4], offset=1, dim1=0, dim2=1, float32, contiguous)

Found:   mismatch [bitwise:aten]: 3 elements differ
         impl tests.faulty.wrong:impl on cpu; reproduced 5/5 in fresh processes
Run it:  python repro_diagonal_ca135460a1d25829.py [--repeat N] [--device cpu|cuda] [--impl MODULE:ATTR]
                      [--timeout SECONDS] [--in-process]
Exit:    1 while the bug is there (any repetition fails), 0 once it is fixed,
         3 if the implementation cannot be loaded.
Needs:   torch, triton and diagfuzz (not Hypothesis).
"""

import argparse
import json
import os
import sys

CASE_JSON = r'''{
  "dim1": 0,
  "dim2": 1,
  "dtype": "float32",
  "invalid": "",
  "layout": {"kinds": ["contiguous"], "shape": [4, 4], "storage_offset": 0, "strides": [4, 1]},
  "offset": 1,
  "op": "diagonal",
  "out_device": "",
  "out_dtype": "",
  "raw_args": [],
  "sizes": [4, 4],
  "values": {"mode": "normal", "seed": 0, "specials": []}
}'''
IMPL = 'tests.faulty.wrong:impl'
DEVICE = 'cpu'
TIMEOUT = 60.0
ORACLE = 'check'


def run_in_this_process(case, impl_spec, device):
    """Rebuild the tensor the op reads, then let the oracle run the impl and compare bits."""
    from diagfuzz import oracles
    from diagfuzz.case import materialise
    from diagfuzz.impl import load_impl

    impl = load_impl(impl_spec)
    x = materialise(case, device)
    print(f"  input: shape {tuple(x.shape)}, strides {x.stride()}, storage offset "
          f"{x.storage_offset()}, {x.dtype} on {x.device}")
    return getattr(oracles, ORACLE)(case, impl, device)


def run_isolated(case, impl_spec, device, timeout):
    """The same, in a fresh executor process: a crash or hang becomes a verdict."""
    from diagfuzz.executor import ProcessRunner

    with ProcessRunner(impl_spec, device, timeout=timeout, oracle=ORACLE) as runner:
        return runner.run(case)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="repetitions (default 1)")
    parser.add_argument("--device", default=DEVICE, help=f"cpu or cuda (default {DEVICE})")
    parser.add_argument("--impl", default=IMPL, help=f"MODULE:ATTR (default {IMPL})")
    parser.add_argument("--timeout", type=float, default=TIMEOUT,
                        help=f"seconds per repetition before it is a hang (default {TIMEOUT})")
    parser.add_argument("--in-process", action="store_true",
                        help="run in this process (for a debugger; a crash kills the script)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat must be >= 1, got {args.repeat}")
    sys.path.insert(0, os.getcwd())  # --impl may name a module of the current directory
    from diagfuzz.case import Case
    from diagfuzz.impl import ImplError

    case = Case.from_json(CASE_JSON)
    print(f"case: {case.describe()}\nimpl: {args.impl} on {args.device}")
    failed = 0
    for i in range(args.repeat):
        try:
            if args.in_process:
                verdict = run_in_this_process(case, args.impl, args.device)
            else:
                verdict = run_isolated(case, args.impl, args.device, args.timeout)
        except ImplError as exc:
            print(f"cannot load the implementation: {exc}", file=sys.stderr)
            return 3
        failed += not verdict.ok
        where = f" [{verdict.check}]" if verdict.check else ""
        print(f"[{i + 1}/{args.repeat}] {verdict.kind}{where}: {verdict.message}")
        if verdict.details:
            print(json.dumps(verdict.details, indent=2, sort_keys=True, default=repr))
    print(f"{failed}/{args.repeat} repetitions failed: "
          f"{'the bug is there' if failed else 'no failure (fixed?)'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
