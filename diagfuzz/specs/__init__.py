"""The specs of the diagonal family: one module per op, and the registry every stage reads.

Every module of this package that defines ``SPEC`` is an op (``base``, ``common``,
``factors``, ``index_reference``, ``triangle`` and ``triangle_inplace`` are the shared
pieces): adding an op is adding its module (docs/adding-an-op.md). ``spec_of(name)`` gives
an op's ``OpSpec``; ``SPECS`` lists the op names in the order the suite, the reports and
the gate list them (``OpSpec.order``).
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from typing import Any

import torch

from diagfuzz.core.case import Case, build_tensor, dtype_of, materialise
from diagfuzz.core.opnames import op_call, op_names
from diagfuzz.specs.base import Operand, OpSpec, Relation

#: Modules of this package that are shared pieces, not ops.
_SHARED = frozenset({"base", "common", "factors", "index_reference", "triangle",
                     "triangle_inplace"})


def _discover() -> dict[str, OpSpec]:
    """Every ``SPEC`` of this package's modules, by op name, in report order."""
    found = []
    for module in pkgutil.iter_modules(__path__):
        if module.name in _SHARED or module.name.startswith("_"):
            continue
        spec = getattr(importlib.import_module(f"{__name__}.{module.name}"), "SPEC", None)
        if isinstance(spec, OpSpec):
            found.append(spec)
    return {spec.name: spec for spec in sorted(found, key=lambda s: (s.order, s.name))}


_REGISTRY = _discover()
#: Every op diagfuzz knows, in report order.
SPECS: tuple[str, ...] = tuple(_REGISTRY)


def _check_sources() -> None:
    """The loaded specs say what the controller and ``diagfuzz.core`` read from their
    sources (``diagfuzz.core.opnames``): the op names in report order, and how each op is
    called and described."""
    if op_names() != SPECS:
        raise ImportError(f"diagfuzz.specs: the loaded specs {SPECS} differ from the names "
                          f"read from their sources {op_names()}")
    for spec in _REGISTRY.values():
        read = op_call(spec.name)
        if (read.method_name, read.operands, read.arguments, read.fields) != (
                spec.method_name, tuple(o.name for o in spec.operands), spec.arguments,
                spec.fields):
            raise ImportError(f"diagfuzz.specs: the spec of {spec.name} differs from what its "
                              f"source's literals say ({read})")


_check_sources()


@cache
def spec_of(name: str) -> OpSpec:
    """The spec of op ``name``; a ValueError naming the known ops otherwise."""
    spec = _REGISTRY.get(name)
    if spec is None:
        raise ValueError(f"unknown op {name!r}; diagfuzz knows {', '.join(SPECS)}")
    return spec


def all_specs() -> tuple[OpSpec, ...]:
    """Every op's spec, in report order."""
    return tuple(spec_of(name) for name in SPECS)


def arguments(case: Case, device: str | torch.device = "cpu",
              tensors: dict[str, torch.Tensor] | None = None) -> dict[str, Any]:
    """Every argument of the op call, by schema name: the tensors the op reads, rebuilt
    bit for bit on ``device`` (or ``tensors``, by name, made by the caller: the huge tier
    builds them on the device), the op's other arguments from the Case's geometry, then
    ``raw_args`` over them; ``out`` (empty) when the Case selects the ``.out`` overload."""
    spec = spec_of(case.op)
    if tensors is not None:
        args: dict[str, Any] = dict(tensors)
    else:
        args = {spec.first.name: materialise(case, device)}
        for name, layout, values in case.others:
            args[name] = build_tensor(case.dtype, layout, values, device)
    fields = {"input_sizes": list(case.sizes), "offset": case.offset, "dim1": case.dim1,
              "dim2": case.dim2}
    for name in spec.arguments:
        args[name] = fields[spec.fields.get(name, name)]
    for name, value in case.raw_args:
        args[name] = value
    if case.out_dtype or case.out_device:
        args["out"] = torch.empty(0, dtype=dtype_of(case.out_dtype or case.dtype),
                                  device=case.out_device or device)
    return args


def read_tensors(case: Case, args: dict[str, Any]) -> dict[str, Any]:
    """The tensors (by name) among ``args`` that the op reads."""
    return {o.name: args[o.name] for o in spec_of(case.op).operands}


__all__ = [
    "SPECS",
    "OpSpec",
    "Operand",
    "Relation",
    "all_specs",
    "arguments",
    "read_tensors",
    "spec_of",
]
