"""The implementation under test: its protocol, what it declares, how ``--impl`` finds it.

An implementation is any object (a module works) providing any of the ops of
``diagfuzz.specs``, each a callable named after the op, or after the method its spec names
(``Impl``'s docstring lists them). Optional: ``<method>_out(..., out=)`` for ``.out``
Cases; ``uses_triton_registration = True`` when calls go through aten with diagfuzz's
kernels (the oracle then proves the kernel ran).

Capability declarations (optional): ``ops``, the op names it provides where its methods
say more (``diag`` is two ops, ``diag`` and ``diag_1d``); ``dtypes``, the dtype names (or
torch dtypes) the implementation supports, or a dict of them per op (or per method);
``supports(case) -> bool`` for anything finer. A Case outside them is "unsupported":
counted, not judged. An implementation that declares nothing supports everything it
provides.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any, Protocol, runtime_checkable

import torch

from diagfuzz.core.case import Case
from diagfuzz.core.opnames import op_call, op_names
from diagfuzz.core.roots import ImplError as ImplError  # re-exported (diagfuzz.impl)
from diagfuzz.core.roots import import_roots as import_roots  # re-exported (diagfuzz.impl)
from diagfuzz.core.roots import locate_impl as locate_impl  # re-exported
from diagfuzz.core.roots import module_file, not_found, use_roots


@runtime_checkable
class Impl(Protocol):
    """What ``--impl`` names: an object with a callable per op it provides, e.g.

    ``diagonal(input, offset=0, dim1=0, dim2=1) -> Tensor`` (a new tensor, as
    ``aten::diagonal_copy``), ``diagonal_backward(grad_output, input_sizes, offset, dim1,
    dim2) -> Tensor``, ``diag_embed(input, offset=0, dim1=-2, dim2=-1)``,
    ``diagonal_scatter(input, src, offset=0, dim1=0, dim2=1)`` and ``diag(input,
    diagonal=0)`` (the ``diag`` and ``diag_1d`` Cases both call it): every op of
    ``diagfuzz.specs``, its arguments in aten's order. The protocol names no method: an
    implementation provides any subset of the ops, declared by having them.
    """


def known_ops() -> tuple[str, ...]:
    """The ops diagfuzz knows (``diagfuzz.specs.SPECS``), in report order."""
    return op_names()


def provides(impl: Any, op: str) -> bool:
    """Whether ``impl`` provides ``op``: a callable named as the op's spec says (the op's
    name, or its ``method``), and ``op`` among the impl's ``ops`` where it declares them
    (one method ``diag`` serves two ops: ``diag`` of a matrix, ``diag_1d`` of a vector)."""
    declared = getattr(impl, "ops", None)
    if declared is not None and op not in declared:
        return False
    return callable(getattr(impl, op_call(op).method_name, None))


def provided_ops(impl: Any) -> tuple[str, ...]:
    """The ops of diagfuzz that ``impl`` provides, in report order."""
    return tuple(op for op in known_ops() if provides(impl, op))


def _dtype_name(value: Any, where: str) -> str:
    if isinstance(value, torch.dtype):
        return str(value).removeprefix("torch.")
    if isinstance(value, str) and isinstance(getattr(torch, value, None), torch.dtype):
        return value
    raise ImplError(f"{where}: {value!r} is not a dtype name of this torch")


def declared_dtypes(impl: Any, op: str) -> tuple[str, ...] | None:
    """The dtype names ``impl`` declares for ``op`` (a dict's entry for the op, else for
    its method); None when it declares none."""
    dtypes = getattr(impl, "dtypes", None)
    if dtypes is None:
        return None
    if isinstance(dtypes, dict):
        key = op if op in dtypes else op_call(op).method_name
        if key not in dtypes:
            return None
        dtypes = dtypes[key]
    if isinstance(dtypes, (str, torch.dtype)):
        dtypes = (dtypes,)
    return tuple(_dtype_name(d, f"{type(impl).__name__}.dtypes") for d in dtypes)


def capabilities(impl: Any, ops: tuple[str, ...]
                 ) -> dict[str, tuple[tuple[str, ...] | None, bool]]:
    """Per op of ``ops``: the dtypes ``impl`` declares (None: it declares none), and
    whether it has the op's ``.out`` method (what the covering stage narrows its model to)."""
    return {op: (declared_dtypes(impl, op),
                 callable(getattr(impl, f"{op_call(op).method_name}_out", None)))
            for op in ops}


def no_method(op: str) -> str:
    """Why an impl without ``op``'s method skips ``op``: the method named (``diag_1d``'s
    is ``diag``)."""
    method = op_call(op).method_name
    return f"the impl provides no {method}" + (f" (the method of {op})" if method != op
                                              else "")


def unsupported(impl: Any, case: Case) -> str:
    """Why ``impl`` declares ``case`` unsupported, or '' when it supports it."""
    if not provides(impl, case.op):
        return no_method(case.op)
    declared = declared_dtypes(impl, case.op)
    if declared is not None and case.dtype not in declared:
        return (f"dtype {case.dtype} is not among the dtypes the impl declares for "
                f"{case.op} ({', '.join(declared)})")
    hook = getattr(impl, "supports", None)
    if callable(hook) and not hook(case):
        return "the impl's supports(case) is False"
    return ""


def _import(module_name: str, spec: str) -> Any:
    """Import ``module_name``, or a module file ``path/to/mod.py``."""
    if module_name.endswith(".py"):
        path = module_file(module_name, spec)
        use_roots([str(path.resolve().parent)])
        module_name = path.stem
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.split(".")[0] == exc.name.split(".")[0]:
            raise ImplError(not_found(spec, module_name)) from exc
        raise ImplError(f"--impl {spec!r}: importing {module_name!r} failed: {exc!r}") from exc
    except Exception as exc:  # any import failure is a usage error naming the module
        raise ImplError(f"--impl {spec!r}: cannot import {module_name!r}: {exc!r}") from exc


def load_impl(spec: str, allow_no_ops: bool = False) -> Any:
    """Import ``MODULE:ATTR`` (or ``MODULE``, or ``path/to/file.py:ATTR``) and check it
    provides at least one op (with a valid declaration, if it makes one); with
    ``allow_no_ops``, the module as imported (a library tested through its
    registrations)."""
    module_name, _, attr = spec.partition(":")
    if not module_name:
        raise ImplError(f"--impl {spec!r}: expected MODULE:ATTR")
    obj: Any = _import(module_name, spec)
    if allow_no_ops:
        return obj
    for part in filter(None, attr.split(".")):
        try:
            obj = getattr(obj, part)
        except AttributeError as exc:
            raise ImplError(f"--impl {spec!r}: {module_name!r} has no attribute "
                            f"{attr!r}") from exc
    if not provided_ops(obj):
        raise ImplError(f"--impl {spec!r}: {obj!r} provides none of the ops "
                        f"{', '.join(known_ops())} (callables of those names)")
    for op in provided_ops(obj):
        declared_dtypes(obj, op)  # a bad declaration is a usage error now, not mid-run
    return obj
