"""The names of the ops diagfuzz knows, in report order, read without importing torch.

Why: the pytest controller of a fuzz run only needs the op names (to plan shards and check
``--diagfuzz-ops``), and it starts the workers only after planning. Importing the specs
(``diagfuzz.specs``) imports torch, 3.4 s of the controller's start on an H200 host. So
each spec module's ``SPEC = OpSpec(order=..., name=...)`` literals are read from its source;
``diagfuzz.specs`` checks at import that the specs it loads say the same.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

SPECS_DIR = Path(__file__).resolve().parents[1] / "specs"
#: Modules of the specs package that are shared pieces, not ops.
SHARED_MODULES = frozenset({"__init__", "base", "common"})


def _literal_spec(path: Path) -> tuple[int, str] | None:
    """(order, name) of the module's ``SPEC = OpSpec(order=..., name=...)``, or None."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "SPEC"
                and isinstance(node.value, ast.Call)):
            keywords = {k.arg: k.value for k in node.value.keywords}
            order, name = keywords.get("order"), keywords.get("name")
            if (isinstance(order, ast.Constant) and isinstance(order.value, int)
                    and isinstance(name, ast.Constant) and isinstance(name.value, str)):
                return order.value, name.value
            raise ValueError(f"{path}: SPEC = OpSpec(...) must give order= and name= as "
                             "literals (the controller reads them without importing torch)")
    return None


@cache
def op_names() -> tuple[str, ...]:
    """Every op's name, in report order (``OpSpec.order``, then name)."""
    found = [spec for path in sorted(SPECS_DIR.glob("*.py"))
             if path.stem not in SHARED_MODULES and not path.stem.startswith("_")
             and (spec := _literal_spec(path)) is not None]
    return tuple(name for _, name in sorted(found))
