"""Bitwise check of the kernels on results of more than 2**31 elements (CUDA GPU only):
diagonal_backward, diagonal_copy, diag_embed and diagonal_scatter (both modes).

int8 keeps each tensor at 2-4.3 GB. Every case compares our result with aten's (registration
off) bit for bit, and also reads a few elements back by hand where the index is beyond
int32, so a kernel that wrapped its offsets cannot pass by matching a wrong reference.

    python benchmarks/large_tensors.py [--out DIR]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time

import torch
from bench_diagonal import sentinel  # 0x5A bytes: an unwritten word shows

import diagfuzz.ops as ops

INT32 = 2**31


def _random_int8(shape: tuple[int, ...]) -> torch.Tensor:
    return torch.randint(-128, 127, shape, dtype=torch.int8, device=ops.DEVICE)


def _equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.stride() == b.stride() and bool(torch.equal(a, b))


def check_backward(sizes: tuple[int, ...], offset: int, dim1: int, dim2: int) -> dict:
    """diagonal_backward into a result of prod(sizes) > 2**31 int8 elements."""
    grad = _random_int8(tuple(torch.empty(sizes, device="meta")
                              .diagonal(offset, dim1, dim2).shape))
    t0 = time.perf_counter()
    ours = ops.diagonal_backward(grad, list(sizes), offset, dim1, dim2)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    ref = torch.ops.aten.diagonal_backward(grad, list(sizes), offset, dim1, dim2)
    ok = _equal(ours, ref)
    del ours  # the same plan through out= into 0x5A bytes: an unwritten word shows
    ours = ops.diagonal_backward_out(grad, list(sizes), offset, dim1, dim2,
                                     out=sentinel(ref.shape, torch.int8))
    ok = ok and _equal(ours, ref)
    # The last diagonal element and the last element, both far beyond int32 in flat index.
    last = ours.diagonal(offset, dim1, dim2)[..., -1]
    ok = ok and bool(torch.equal(last, grad[..., -1])) and ours.reshape(-1)[-1].item() == \
        ref.reshape(-1)[-1].item()
    del ours, ref
    plans = importlib.import_module("diagfuzz.ops.diagonal_backward")._PLANS
    _, plan = list(plans.values())[-1]  # this call's (plans are kept in call order)
    return {"op": "diagonal_backward", "sizes": sizes, "offset": offset, "dims": (dim1, dim2),
            "result_elements": int(torch.Size(sizes).numel()), "bitwise_equal": ok,
            "transposed": bool(plan.constexprs["TRANSPOSE"]), "first_call_s": round(seconds, 2)}


def check_copy(sizes: tuple[int, ...], offset: int, dim1: int, dim2: int,
               expand_first: bool = False) -> dict:
    """diagonal_copy into a result of more than 2**31 int8 elements."""
    # expand_first: a stride-0 outer dim, so a huge result comes from a small input.
    x = _random_int8((1, *sizes[1:])).expand(sizes) if expand_first else _random_int8(sizes)
    t0 = time.perf_counter()
    ours = ops.diagonal_copy(x, offset, dim1, dim2)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    ref = torch.ops.aten.diagonal_copy(x, offset, dim1, dim2)
    ok = _equal(ours, ref) and bool(torch.equal(ours[..., -1], x.diagonal(offset, dim1,
                                                                        dim2)[..., -1]))
    del ours  # the same plan through out= into 0x5A bytes: an unwritten word shows
    ours = ops.diagonal_copy_out(x, offset, dim1, dim2, out=sentinel(ref.shape, torch.int8))
    ok = ok and _equal(ours, ref)
    n = ours.numel()
    del ours, ref, x
    return {"op": "diagonal_copy", "sizes": sizes, "offset": offset, "dims": (dim1, dim2),
            "expanded": expand_first, "result_elements": n, "bitwise_equal": ok,
            "first_call_s": round(seconds, 2)}


def check_embed(shape: tuple[int, ...], offset: int, dim1: int, dim2: int) -> dict:
    """diag_embed into a result of more than 2**31 int8 elements."""
    x = _random_int8(shape)
    t0 = time.perf_counter()
    ours = ops.diag_embed(x, offset, dim1, dim2)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    ref = torch.ops.aten.diag_embed(x, offset, dim1, dim2)
    ok = _equal(ours, ref)
    del ours  # the same plan through out= into 0x5A bytes: an unwritten word shows
    ours = ops.diag_embed_out(x, offset, dim1, dim2, out=sentinel(ref.shape, torch.int8))
    ok = ok and _equal(ours, ref) and bool(torch.equal(
        ours.diagonal(offset, dim1, dim2)[..., -1], x[..., -1]))
    n = ours.numel()
    del ours, ref, x
    return {"op": "diag_embed", "sizes": shape, "offset": offset, "dims": (dim1, dim2),
            "result_elements": n, "bitwise_equal": ok, "first_call_s": round(seconds, 2)}


def check_scatter(sizes: tuple[int, ...], offset: int, dim1: int, dim2: int,
                  expand_first: bool = False) -> dict:
    """diagonal_scatter into a result of more than 2**31 int8 elements: a clone of the
    input's storage, or (``expand_first``: a stride-0 outer dim) a dense gather of it."""
    x = _random_int8((1, *sizes[1:])).expand(sizes) if expand_first else _random_int8(sizes)
    src = _random_int8(tuple(x.diagonal(offset, dim1, dim2).shape))
    t0 = time.perf_counter()
    ours = ops.diagonal_scatter(x, src, offset, dim1, dim2)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    ref = torch.ops.aten.diagonal_scatter(x, src, offset, dim1, dim2)
    ok = (_equal(ours, ref) and ours.storage_offset() == ref.storage_offset()
          and ours.untyped_storage().nbytes() == ref.untyped_storage().nbytes()
          and bool(torch.equal(ours.diagonal(offset, dim1, dim2)[..., -1], src[..., -1])))
    del ours  # the gather through out= into 0x5A bytes: an unwritten word shows
    ours = ops.diagonal_scatter_out(x, src, offset, dim1, dim2,
                                    out=sentinel(ref.shape, torch.int8))
    ok = ok and bool(torch.equal(ours, ref))
    n = ours.numel()
    del ours, ref, x, src
    return {"op": "diagonal_scatter", "sizes": sizes, "offset": offset, "dims": (dim1, dim2),
            "expanded": expand_first, "result_elements": n, "bitwise_equal": ok,
            "first_call_s": round(seconds, 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT") or "bench-out")
    args = parser.parse_args()
    if ops.INTERPRET:
        print("large_tensors: needs a CUDA GPU", file=sys.stderr)
        return 2
    ops.disable()
    torch.manual_seed(0)
    results = []
    cases = [
        lambda: check_backward((46341, 46341), 0, 0, 1),          # 2-D, 2**31 + 4633
        lambda: check_backward((46341, 46341), -7, 1, 0),
        lambda: check_backward((2**30 + 9, 2, 2), 1, 1, 2),       # many rows, tiny diagonal
        lambda: check_backward((3, 3, 2**28 + 5), 0, 0, 1),       # one width beyond int32/4
        lambda: check_backward((2, 2, 2**30), 0, 0, 1),           # transposed runs, 2**32
        lambda: check_copy((2**30 + 9, 2, 2), 0, 1, 2),           # input 4.3 GB, result 2**31+
        lambda: check_copy((524800, 4096, 4096), 1, 2, 1, expand_first=True),
        lambda: check_embed((2, 32769), 0, -2, -1),               # 2 * 32769**2
        lambda: check_embed((46341,), -5, 1, 0),                  # 46346**2
        lambda: check_scatter((46341, 46341), 3, 1, 0),           # clone of 2**31 + 4633
        lambda: check_scatter((2**30 + 9, 2, 2), 0, 1, 2, expand_first=True),  # gather
        lambda: check_scatter((2, 2, 2**29 + 7), 0, 0, 1),  # runs of 2**29 + 7 elements
    ]
    for case in cases:
        r = case()
        torch.cuda.empty_cache()
        results.append(r)
        print(json.dumps(r), flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "large.json"), "w") as f:
        json.dump(results, f, indent=1)
    bad = [r for r in results if not r["bitwise_equal"]]
    assert all(r["result_elements"] > INT32 for r in results)
    assert any(r.get("transposed") for r in results), "no case took the transposed runs"
    print(f"large tensors: {len(results) - len(bad)}/{len(results)} bitwise equal "
          f"(all results > 2**31 elements)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
