"""The ops diagfuzz knows and how each is called, read from the spec sources without
importing torch or the specs.

Why: the pytest controller of a fuzz run only needs the op names (to plan shards and check
``--diagfuzz-ops``), and it starts the workers only after planning. Importing the specs
(``diagfuzz.specs``) imports torch, 3.4 s of the controller's start on an H200 host. So
each spec module's ``SPEC = OpSpec(order=..., name=...)`` literals are read from its source;
``diagfuzz.specs`` checks at import that the specs it loads say the same.

The same literals say how an op is called (``OpCall``: the implementation's method, the
tensors' and the other arguments' names): what ``diagfuzz.core`` itself needs of an op (a
Case's full description, which methods an implementation provides), so the core never
imports the specs, which import it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

SPECS_DIR = Path(__file__).resolve().parents[1] / "specs"
#: Modules of the specs package that are shared pieces, not ops.
SHARED_MODULES = frozenset({"__init__", "base", "common", "factors", "index_reference",
                            "triangle", "triangle_inplace"})


@dataclass(frozen=True)
class OpCall:
    """What an op's ``SPEC = OpSpec(...)`` literal says: its name and report order, the
    implementation's method ('': the op's name), the names of the tensors it reads and of
    its other arguments, and the arguments whose Case field has another name."""

    order: int
    name: str
    method: str = ""
    operands: tuple[str, ...] = ()
    arguments: tuple[str, ...] = ()
    fields: dict[str, str] = field(default_factory=dict)

    @property
    def method_name(self) -> str:
        """The implementation's method for the op's Cases (``OpSpec.method_name``)."""
        return self.method or self.name


def _refuse(path: Path, what: str) -> ValueError:
    return ValueError(f"{path}: SPEC = OpSpec(...) must give {what} as literals (the "
                      "controller and diagfuzz.core read them without importing torch)")


def _operand_name(node: ast.expr, path: Path) -> str:
    """The name of one ``Operand("name", ...)`` (or ``Operand(name="name", ...)``)."""
    if isinstance(node, ast.Call):
        named = [k.value for k in node.keywords if k.arg == "name"]
        first = node.args[0] if node.args else (named[0] if named else None)
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return first.value
    raise _refuse(path, "operands= (a tuple of Operand('name', ...))")


def _literal(node: ast.expr | None, kind: type, path: Path, what: str) -> Any:
    if node is None:
        return kind()
    try:
        value = ast.literal_eval(node)
    except ValueError:
        raise _refuse(path, what) from None
    if not isinstance(value, kind):
        raise _refuse(path, what)
    return value


def _literal_spec(path: Path) -> OpCall | None:
    """What the module's ``SPEC = OpSpec(order=..., name=..., ...)`` says, or None."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "SPEC"
                and isinstance(node.value, ast.Call)):
            keywords = {k.arg: k.value for k in node.value.keywords}
            order, name = keywords.get("order"), keywords.get("name")
            if not (isinstance(order, ast.Constant) and isinstance(order.value, int)
                    and isinstance(name, ast.Constant) and isinstance(name.value, str)):
                raise _refuse(path, "order= and name=")
            operands = keywords.get("operands")
            if operands is not None and not isinstance(operands, ast.Tuple):
                raise _refuse(path, "operands= (a tuple of Operand('name', ...))")
            arguments = _literal(keywords.get("arguments"), tuple, path, "arguments=")
            fields = _literal(keywords.get("fields"), dict, path, "fields=")
            method = _literal(keywords.get("method"), str, path, "method=")
            return OpCall(
                order=order.value, name=name.value, method=str(method),
                operands=tuple(_operand_name(o, path) for o in getattr(operands, "elts", ())),
                arguments=tuple(str(a) for a in arguments),
                fields={str(k): str(v) for k, v in fields.items()})
    return None


@cache
def _calls() -> dict[str, OpCall]:
    """Every op's call, by name, in report order (``OpSpec.order``, then name)."""
    found = [spec for path in sorted(SPECS_DIR.glob("*.py"))
             if path.stem not in SHARED_MODULES and not path.stem.startswith("_")
             and (spec := _literal_spec(path)) is not None]
    return {spec.name: spec for spec in sorted(found, key=lambda s: (s.order, s.name))}


@cache
def op_names() -> tuple[str, ...]:
    """Every op's name, in report order (``OpSpec.order``, then name)."""
    return tuple(_calls())


def op_call(name: str) -> OpCall:
    """How op ``name`` is called; a ValueError naming the known ops otherwise (as
    ``diagfuzz.specs.spec_of``)."""
    call = _calls().get(name)
    if call is None:
        raise ValueError(f"unknown op {name!r}; diagfuzz knows {', '.join(op_names())}")
    return call
