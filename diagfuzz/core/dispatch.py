"""References the library under test cannot replace: aten's own kernels while diagfuzz
judges, the library's registrations only while the implementation runs.

A library that registers kernels into aten (``torch.library.Library("aten", "IMPL")``, as
FlagGems' ``enable()`` and ``diagfuzz.ops.enable()`` do) replaces what every later aten
call runs, the oracle's references and its own tensor work (copies, comparisons, fills)
included. So diagfuzz watches registrations: ``watch()`` (done on import of this module,
before any implementation loads) wraps ``torch.library.Library.impl``. Each kernel a
library registers into ``aten`` is registered through a wrapper that holds the kernel the
dispatcher computed for that op and key just before (``torch.library.get_kernel``'s
``SafeKernelFunction``: aten's own, or an earlier library's wrapper, which defers further).
Inside ``aten_only()`` (every oracle judges inside it) a wrapper calls that earlier
kernel; inside ``under_test()`` (the oracle's call of the implementation) it calls the
library's kernel and counts the call, which proves the library served it. Switching is a
flag, not a re-registration.

Not wrapped: torch's own Python registrations (meta kernels, decompositions) and the
oracle's (sentinel allocations); kernels registered before ``watch()`` or from C++
(``TORCH_LIBRARY_IMPL``), which ``unisolated()`` finds by their dispatcher entries and the
run reports: those could stand in for a reference.
"""

from __future__ import annotations

import os
import sys
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import FrameType
from typing import Any

import torch

from diagfuzz.core.origin import display_path

#: The runtime keys a registration at an alias key covers, whose earlier kernels are kept.
_ALIAS_RUNTIME_KEYS = ("CPU", "CUDA", "Meta", "AutogradCPU", "AutogradCUDA")
_ALIAS_KEYS = ("CompositeImplicitAutograd", "CompositeExplicitAutograd",
               "CompositeExplicitAutogradNonFunctional", "Autograd")


@dataclass
class Registration:
    """One kernel a library registered into aten through ``torch.library``."""

    op: str  # "aten::diag_embed", "aten::diagonal_copy.out"
    key: str  # the dispatch key it was registered for ("CUDA", "AutogradCPU", ...)
    where: str  # the registering call, "flag_gems/runtime/register.py:132"
    module: str  # the registering module's top-level package ("flag_gems")
    calls: int = 0  # calls that ran the library's kernel (under_test)
    earlier: dict[str, Any] = field(default_factory=dict, repr=False)
    #: The registering ``Library``, weakly: holding it would keep alive registrations a
    #: library drops by dropping its ``Library``.
    library: Any = field(default=None, repr=False)

    @property
    def active(self) -> bool:
        """Whether the registering ``Library`` still holds it (``_destroy`` ends it)."""
        library = self.library() if self.library is not None else None
        return library is not None and getattr(library, "m", None) is not None

    def describe(self) -> str:
        return f"{self.op} at {self.key} by {self.module} ({self.where})"


#: The wrapped registrations, in order (those of destroyed Libraries pruned as new ones
#: come).
REGISTRATIONS: list[Registration] = []
#: The open ``aten_only`` (True) and ``under_test`` (False) blocks; the innermost decides.
#: A process-wide stack, not a thread-local: autograd runs a CUDA backward on a thread of
#: its own, which must see the mode of the block that called ``backward``.
_mode: list[bool] = []


def judging_with_aten() -> bool:
    """True inside ``aten_only()`` (and not inside a nested ``under_test()``)."""
    return bool(_mode) and _mode[-1]


class _Mode:
    """One ``aten_only`` / ``under_test`` block. A class, not a generator context
    manager: a Case opens several, and each costs 0.6-0.9 us instead of 1.9-2.7 (more
    when the call in it raises, as every refused call of error parity does)."""

    __slots__ = ("aten",)

    def __init__(self, aten: bool) -> None:
        self.aten = aten

    def __enter__(self) -> None:
        _mode.append(self.aten)

    def __exit__(self, *exc: object) -> None:
        _mode.pop()


def aten_only() -> Any:
    """A block in which every library's aten registration defers to the kernel it
    replaced: references, sentinels, copies and comparisons are aten's own."""
    return _Mode(True)


def under_test() -> Any:
    """A block in which the libraries' registrations serve aten's ops (the call of the
    implementation under test), inside an ``aten_only`` block or not."""
    return _Mode(False)


def judged(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` (an oracle entry point) run inside ``aten_only()``."""
    import functools

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        with aten_only():
            return fn(*args, **kwargs)

    return run


def overrides(module: str | None = None) -> list[Registration]:
    """The active registrations (of ``module``'s package, when given)."""
    return [r for r in REGISTRATIONS if r.active and (module is None or r.module == module)]


# --- who registers ----------------------------------------------------------------------

@cache
def _torch_dir() -> str:
    return str(Path(torch.__file__).resolve().parent) + os.sep


def _caller() -> tuple[str, str] | None:
    """(file:line, package) of the code that asked ``torch.library`` to register; None
    when that is torch itself or diagfuzz's oracle (never wrapped)."""
    layers = (__file__, _torch_dir() + "library.py", _torch_dir() + "_library" + os.sep)
    frame: FrameType | None = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith(layers):
        frame = frame.f_back  # torch.library's own layers (its decorators), or this hook
    if frame is None or frame.f_code.co_filename.startswith(_torch_dir()):
        return None  # torch registering its own (meta kernels, decompositions)
    path = os.path.abspath(frame.f_code.co_filename)
    name = str(frame.f_globals.get("__name__", "")) or Path(path).stem
    module = package_of(name)
    if module == "diagfuzz":
        return None  # the oracle's own (sentinel allocations)
    return f"{display_path(path)}:{frame.f_lineno}", module


def package_of(module: str) -> str:
    """The library a module belongs to: its top-level package, except that diagfuzz's
    kernels (``diagfuzz.ops``) are a library of their own inside diagfuzz."""
    if module == "diagfuzz.ops" or module.startswith("diagfuzz.ops."):
        return "diagfuzz.ops"
    return module.split(".")[0]


def _earlier_kernels(op: str, key: str) -> dict[str, Any]:
    """The kernels the dispatcher computes now for ``op`` at ``key`` (each runtime key an
    alias key covers): what a wrapper defers to inside ``aten_only()``."""
    keys = _ALIAS_RUNTIME_KEYS if key in _ALIAS_KEYS else (key,)
    earlier = {}
    for runtime in keys:
        try:
            if torch._C._dispatch_has_computed_kernel_for_dispatch_key(op, runtime):
                earlier[runtime] = torch._C._dispatch_get_computed_kernel_for_dispatch_key(
                    op, runtime)
        except RuntimeError:  # a key this build does not know
            continue
    return earlier


def _wrapper(registration: Registration, fn: Callable[..., Any],
             with_keyset: bool) -> Callable[..., Any]:
    def kernel(keyset: Any, *args: Any, **kwargs: Any) -> Any:
        if _mode and _mode[-1]:
            key = keyset.highestPriorityTypeId().name
            earlier = registration.earlier.get(key)
            if earlier is None:
                raise RuntimeError(
                    f"diagfuzz cannot reach aten's own kernel of {registration.op} for "
                    f"{key}: {registration.describe()} replaced the only one")
            args, kwargs = _as_tensors(registration, args, kwargs)
            return earlier.call_boxed(keyset, *args, **kwargs)
        registration.calls += 1
        return fn(keyset, *args, **kwargs) if with_keyset else fn(*args, **kwargs)

    kernel.__name__ = getattr(fn, "__name__", "kernel")
    kernel.__qualname__ = getattr(fn, "__qualname__", kernel.__name__)
    return kernel


@cache
def _tensor_arguments(op: str) -> tuple[tuple[int, str], ...]:
    """(position, name) of ``op``'s Tensor arguments (its schema)."""
    name, _, overload = op.removeprefix("aten::").partition(".")
    schema = getattr(getattr(torch.ops.aten, name), overload or "default")._schema
    return tuple((i, a.name) for i, a in enumerate(schema.arguments)
                 if isinstance(a.type, torch._C.TensorType))


def _scalar_tensor(value: Any) -> Any:
    """A number torch handed a Python kernel for a Tensor argument (a wrapped number), as
    the 0-dim tensor of the dtype torch wraps it in."""
    if isinstance(value, bool):
        return torch.tensor(value)
    if isinstance(value, int):
        return torch.tensor(value, dtype=torch.int64)
    if isinstance(value, float):
        return torch.tensor(value, dtype=torch.get_default_dtype())
    if isinstance(value, complex):
        return torch.tensor(value)
    return value


def _as_tensors(registration: Registration, args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``args`` and ``kwargs`` with numbers in Tensor places made tensors: torch unwraps
    wrapped numbers for a Python kernel, and ``call_boxed`` takes only tensors there."""
    if not any(isinstance(a, (int, float, complex)) for a in (*args, *kwargs.values())):
        return args, kwargs
    fixed = list(args)
    for i, name in _tensor_arguments(registration.op):
        if i < len(fixed):
            fixed[i] = _scalar_tensor(fixed[i])
        elif name in kwargs:
            kwargs = {**kwargs, name: _scalar_tensor(kwargs[name])}
    return tuple(fixed), kwargs


_original_impl: Callable[..., Any] | None = None


def _qualified(op_name: Any) -> str:
    """``aten::name[.overload]`` of what ``Library.impl`` takes: a name or an OpOverload."""
    if isinstance(op_name, torch._ops.OpOverload):
        schema = op_name._schema
        name = schema.name + (f".{schema.overload_name}" if schema.overload_name else "")
    else:
        name = str(op_name)
    return name if "::" in name else f"aten::{name}"


def _watched(library: Any, op_name: Any, fn: Any, dispatch_key: str,
             with_keyset: bool) -> tuple[Registration, Callable[..., Any], str] | None:
    """The registration record, wrapper and key for one ``Library.impl`` call, or None
    for one diagfuzz leaves alone (torch's, the oracle's, another namespace's, a
    fallthrough, or one whose earlier kernels cannot be read)."""
    caller = _caller() if getattr(library, "ns", "") == "aten" else None
    if (caller is None or not callable(fn)
            or fn is getattr(torch.library, "fallthrough_kernel", None)):
        return None
    key = dispatch_key or getattr(library, "dispatch_key", "") or "CompositeImplicitAutograd"
    try:
        op = _qualified(op_name)
        registration = Registration(op, key, caller[0], caller[1],
                                    earlier=_earlier_kernels(op, key),
                                    library=weakref.ref(library))
    except Exception:  # never break a library's registration: unisolated() reports it
        return None
    return registration, _wrapper(registration, fn, with_keyset), key


def _watched_impl(self: Any, op_name: Any, fn: Any, dispatch_key: str = "", *,
                  with_keyset: bool = False, **kwargs: Any) -> Any:
    assert _original_impl is not None
    watched = _watched(self, op_name, fn, dispatch_key, with_keyset)
    if watched is None:
        return _original_impl(self, op_name, fn, dispatch_key, with_keyset=with_keyset,
                              **kwargs)
    registration, wrapper, key = watched
    result = _original_impl(self, op_name, wrapper, key, with_keyset=True, **kwargs)
    # Registrations a destroyed Library held go (a switch on and off registers anew).
    REGISTRATIONS[:] = [r for r in REGISTRATIONS if r.active]
    REGISTRATIONS.append(registration)
    return result


def watch() -> None:
    """Wrap every later aten registration made through ``torch.library`` (idempotent)."""
    global _original_impl
    if _original_impl is not None:
        return
    _original_impl = torch.library.Library.impl
    torch.library.Library.impl = _watched_impl  # type: ignore[method-assign]


# --- what could still stand in for a reference ------------------------------------------

#: Dispatcher entries of torch's own kernels name files of torch's build (its CI's checkout
#: ``/__w/pytorch/pytorch/``) or package.
_TORCH_SOURCES = ("/pytorch/", "torch/csrc", "aten/src", "build/aten", "torch/_")


def _entries(op: str) -> list[tuple[str, str]]:
    """(key, where) of every kernel registered for ``op`` (``_dispatch_dump``)."""
    entries = []
    for line in torch._C._dispatch_dump(op).splitlines():
        key, sep, rest = line.partition(": registered at ")
        if sep:
            entries.append((key.strip(), rest.split(" :: ")[0].strip()))
    return entries


def unisolated(ops: Iterable[str]) -> list[str]:
    """Kernels of ``ops`` ("aten::diag_embed") registered outside torch and outside the
    watched ``torch.library`` path (C++ extensions, or before ``watch()``): diagfuzz
    cannot switch them off, so they may stand in for a reference."""
    watched = {(r.op, r.key) for r in overrides()}
    found = []
    for op in ops:
        for key, where in _entries(op):
            if "[alias]" in key or any(s in where for s in _TORCH_SOURCES):
                continue
            if (op, key) in watched:  # deferred inside aten_only()
                continue
            found.append(f"{op} at {key} ({where})")
    return found


watch()

__all__ = ["REGISTRATIONS", "Registration", "aten_only", "judged", "judging_with_aten",
           "overrides", "package_of", "under_test", "unisolated", "watch"]
