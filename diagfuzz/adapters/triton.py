"""Every use of Triton's private API, in one place.

Two things diagfuzz does that Triton does not promise:

* **Direct launches** (``ops._tiling.Launcher``): after the first launch of a kernel variant,
  later launches call the compiled kernel's own launcher (``CompiledKernel.run`` with its
  ``function`` and ``packed_metadata``, loaded by ``_init_handles``), skipping
  ``JITFunction.run``'s per-call binding of ~30 arguments; launch hooks
  (``triton.knobs.runtime``) get their metadata only when one listens. The launcher falls
  back to Triton's own path for good if any of this raises.
* **Compiling for a GPU without one** (``ops._gpu_compile``): ``ASTSource`` and
  ``GPUTarget`` compile a variant to an sm_90 cubin.

tests/test_adapters.py fails loudly when any of these moves; pyproject.toml bounds Triton to
the versions proven to work.
"""

from __future__ import annotations  # noqa: I001  (the runtime first, then Triton)

from typing import Any

import diagfuzz.core.runtime  # noqa: F401  (it picks Triton's interpreter where there is no GPU)
import triton

#: What a direct launch needs of a compiled kernel: itself, its launcher, its function
#: handle and its packed metadata.
Direct = tuple[Any, Any, Any, Any]


def direct_handles(compiled: Any) -> Direct:
    """The compiled kernel's handles for ``launch_direct`` (loads them first, as
    ``CompiledKernel[grid]`` does)."""
    compiled._init_handles()
    return (compiled, compiled.run, compiled.function, compiled.packed_metadata)


def launch_direct(direct: Direct, n_programs: int, stream: int, args: tuple[Any, ...]) -> None:
    """``CompiledKernel[grid](*args)`` for grid ``(n_programs, 1, 1)`` on ``stream``;
    launch metadata and hooks as Triton passes them whenever a hook listens (a profiler
    still sees every launch)."""
    compiled, run, function, packed = direct
    hooks = triton.knobs.runtime
    enter, leave = hooks.launch_enter_hook, hooks.launch_exit_hook
    if listening(enter) or listening(leave):
        grid = (n_programs, 1, 1)
        run(grid[0], 1, 1, stream, function, packed,
            compiled.launch_metadata(grid, stream, *args), enter, leave, *args)
    else:  # nobody listens: no metadata to build, no hooks to call (H200: 11.4 -> 6.8 us)
        run(n_programs, 1, 1, stream, function, packed, None, None, None, *args)


def listening(hook: Any) -> bool:
    """Whether a Triton launch hook would do anything: set, and (Triton >= 3.5 keeps an
    always-present chain of hooks) not an empty chain."""
    return hook is not None and bool(getattr(hook, "calls", True))


def compile_for(kernel: Any, signature: dict[str, str], constexprs: dict[str, Any],
                attrs: dict[Any, Any], target: tuple[str, int, int], num_warps: int) -> Any:
    """Compile one variant of ``kernel`` for ``target`` (backend, arch, warp size) without a
    GPU: Triton's compiled kernel, ``.asm`` holding ttir ... cubin."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    source = ASTSource(kernel, signature, constexprs, attrs)
    return triton.compile(source, target=GPUTarget(*target), options={"num_warps": num_warps})
