"""FlagGems 5.0.2: the Triton kernels FlagGems ships for the diagonal family.

FlagGems (https://github.com/flagos-ai/FlagGems) ships ``diagonal_backward``, ``diag`` and
``diag_embed`` in ``flag_gems.ops`` (``diagonal.py``, ``diag.py``, ``diag_embed.py``), and
no ``diagonal_copy`` nor ``diagonal_scatter``: this implementation provides those three,
each FlagGems' function called directly, as FlagGems' aten registration calls it:
``diagonal_backward(grad_output, input_sizes, offset, dim1, dim2)``, ``diag(x,
diagonal=0)`` (a 1-D input's square matrix, or a 2-D input's diagonal: diagfuzz's ``diag``
and ``diag_1d`` streams both call it) and ``diag_embed(x, offset=0, dim1=-2, dim2=-1)``.
Beside the family, the diagonal-offset ops it registers into aten: ``triu(x, diagonal=0)``
and ``triu_`` (``triu.py``) and ``tril(x, diagonal=0)`` (``tril.py``); not ``tril_``.
``dtypes`` names, per op, the dtypes FlagGems' own tests run it with; diagfuzz counts
Cases of other dtypes as unsupported. No ``.out`` forms (FlagGems registers none of these
ops' ``.out`` overloads): the oracle counts ``.out`` Cases unsupported.

GPU only. FlagGems 5.0.2 does not import on a machine without a GPU: it finds its vendor by
running ``nvidia-smi`` and the like, and its kernel wrappers (``libentry``,
``pointwise_dynamic``) require compiled Triton functions, which Triton's interpreter does
not make (``docs/findings.md``). Importing this module there raises ImportError saying so;
``--impl`` reports it as a usage error.

Install (flag-gems pins torch, numpy and packaging versions: install without dependencies,
then its import-time dependencies, so that pip leaves torch and numpy alone)::

    pip install flag-gems==5.0.2 --no-deps
    pip install PyYAML==6.0.3 sqlalchemy==2.0.48 --no-deps

On a GPU machine without network, ``examples/fetch_wheels.sh`` downloads these as wheels
into ``.whl/`` (on a machine with network), and
``pip install --no-deps --no-index .whl/*.whl`` installs them there.

Fuzz it, and gate it, from the repository root, on the GPU machine::

    tools/dev fuzz --impl=examples.flaggems:impl
    tools/dev gate --impl=examples.flaggems:impl
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import torch

INSTALL = ("pip install flag-gems==5.0.2 --no-deps && "
           "pip install PyYAML==6.0.3 sqlalchemy==2.0.48 --no-deps")


def _forget_partial_import() -> None:
    """Drop the modules a failed ``import flag_gems`` left behind, so that importing again
    fails the same way instead of on half-initialised singletons."""
    for name in [n for n in sys.modules if n == "flag_gems" or n.startswith("flag_gems.")]:
        del sys.modules[name]


try:
    import flag_gems
except ModuleNotFoundError as exc:
    _forget_partial_import()
    if exc.name == "flag_gems":
        raise ImportError(f"examples.flaggems needs FlagGems 5.0.2, which is not installed: "
                          f"{INSTALL}") from exc
    raise ImportError(f"FlagGems is installed but its dependency {exc.name!r} is not: "
                      f"{INSTALL}") from exc
except Exception as exc:  # FlagGems' import itself fails: no GPU, Triton's interpreter
    _forget_partial_import()
    raise ImportError(
        f"FlagGems is installed but does not import here ({type(exc).__name__}: "
        f"{' '.join(str(exc).split())}). "
        "FlagGems 5.0.2 needs a GPU: it detects its vendor with nvidia-smi and the like, and "
        "its kernel wrappers refuse the functions Triton's interpreter makes "
        "(TRITON_INTERPRET=1, which diagfuzz sets on a machine without a GPU)") from exc

from flag_gems.ops.diag import diag as _diag  # noqa: E402
from flag_gems.ops.diag_embed import diag_embed as _diag_embed  # noqa: E402
from flag_gems.ops.diagonal import diagonal_backward as _diagonal_backward  # noqa: E402
from flag_gems.ops.tril import tril as _tril  # noqa: E402
from flag_gems.ops.triu import triu as _triu  # noqa: E402
from flag_gems.ops.triu import triu_ as _triu_  # noqa: E402

#: The FlagGems version imported (the dtypes below are 5.0.2's).
flag_gems_version: str = flag_gems.__version__

#: Calls do not go through diagfuzz's aten registration (no dispatch proof to ask for).
uses_triton_registration = False

#: The dtypes FlagGems tests diagonal_backward with: FLOAT_DTYPES of its tests
#: (tests/accuracy_utils.py: float16, float32, and bfloat16 where the device has it;
#: test_accuracy_diagonal_backward in tests/test_special_ops.py).
backward_dtypes: tuple[str, ...] = ("float16", "bfloat16", "float32")

#: The dtypes FlagGems tests diag and diag_embed with: FLOAT_DTYPES + INT_DTYPES (int16,
#: int32) + BOOL_TYPES (test_accuracy_diag, test_accuracy_diag_embed).
diag_dtypes: tuple[str, ...] = ("float16", "bfloat16", "float32", "int16", "int32", "bool")

#: The dtypes FlagGems tests triu and tril with: FLOAT_DTYPES (test_accuracy_triu,
#: test_accuracy_tril in its tests: gems_assert_equal, which calls -0.0 equal to +0.0).
triangle_dtypes: tuple[str, ...] = backward_dtypes

#: What diagfuzz fuzzes, per op (``diag`` is the method of the diag and diag_1d streams).
dtypes: dict[str, tuple[str, ...]] = {"diagonal_backward": backward_dtypes,
                                      "diag": diag_dtypes, "diag_embed": diag_dtypes,
                                      "triu": triangle_dtypes, "tril": triangle_dtypes,
                                      "triu_": triangle_dtypes}


def diagonal_backward(grad_output: torch.Tensor, input_sizes: Sequence[int], offset: int,
                      dim1: int, dim2: int) -> torch.Tensor:
    """FlagGems' diagonal_backward (``torch.zeros``, then its pointwise copy kernel)."""
    return _diagonal_backward(grad_output, input_sizes, offset, dim1, dim2)


def diag(x: torch.Tensor, diagonal: int = 0) -> torch.Tensor:
    """FlagGems' diag: a 1-D input's diagonal matrix, or a 2-D input's diagonal."""
    return _diag(x, diagonal)


def diag_embed(x: torch.Tensor, offset: int = 0, dim1: int = -2,
               dim2: int = -1) -> torch.Tensor:
    """FlagGems' diag_embed: ``x``'s last dim placed on a diagonal of two new dims."""
    return _diag_embed(x, offset, dim1, dim2)


def triu(x: torch.Tensor, diagonal: int = 0) -> torch.Tensor:
    """FlagGems' triu: the upper triangle of each matrix, zeros below."""
    return _triu(x, diagonal)


def triu_(x: torch.Tensor, diagonal: int = 0) -> torch.Tensor:
    """FlagGems' triu_: triu written into ``x``, which it returns."""
    return _triu_(x, diagonal)


def tril(x: torch.Tensor, diagonal: int = 0) -> torch.Tensor:
    """FlagGems' tril: the lower triangle of each matrix, zeros above."""
    return _tril(x, diagonal)


#: The implementation ``--impl=examples.flaggems:impl`` names: this module.
impl = sys.modules[__name__]
