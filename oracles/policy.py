"""What the oracle demands of an implementation, where the layer it is called at decides.

Two rules keep a verdict on someone else's code about differences a user can observe:

* **Error parity at the layer users call.** Binding-level invalid classes (a non-tensor
  where a tensor goes, a non-integer or an int64-overflowing integer argument) are caught by
  torch's Python bindings or the dispatcher's schema matching before any kernel registered
  into aten runs. Called directly, an implementation only has to refuse them: it must raise
  (any type), never return. ``strict`` demands one of the types the public bindings raise
  (TypeError or ValueError from torch's Python functions, RuntimeError from ``torch.ops``).
  Value-level classes (an input of a rank the op refuses, dims out of range, identical
  dims, a grad_output or src of the wrong shape, negative sizes, an offset whose result
  cannot exist, an ``out`` of another dtype or device) reach the kernel's own checks, so
  the implementation must raise exactly aten's type: an AssertionError, a KeyError or an
  AttributeError there is a finding. Wrapped exceptions (``raise ... from``, torch._dynamo's
  wrappers) are unwrapped first: the wrapper is how a compiler reports aten's error.
* **Metadata that matters.** A stride changes an address only along a dim of more than one
  element, and no stride of an empty tensor is ever used: those are not compared.
"""

from __future__ import annotations

from collections.abc import Iterator

#: Invalid classes the Python binding or the schema matcher rejects before any kernel runs.
BINDING_CLASSES = frozenset({"non_tensor", "non_integer", "int_overflow"})
#: What torch's public bindings raise for a binding-level invalid call.
BINDING_TYPES: tuple[type[BaseException], ...] = (TypeError, ValueError, RuntimeError)
#: Modules whose exceptions wrap another one (their ``__context__`` is the real error).
_WRAPPER_MODULES = ("torch._dynamo", "torch._inductor")

#: The policy table of the README: (class, level, what is required, why).
POLICY = (
    ("non_tensor, non_integer, int_overflow", "binding",
     "raises (any type); `--diagfuzz-strict`: TypeError, ValueError or RuntimeError",
     "torch's Python binding or schema matching rejects the call before any registered "
     "kernel runs; each public entry point raises its own type"),
    ("rank0, rank1, high_rank, dim_above_range, dim_below_range, same_dims, "
     "grad_output_shape, src_shape, negative_size, huge_offset, out_dtype, out_device",
     "value",
     "raises exactly aten's type (after unwrapping `raise ... from` and torch._dynamo "
     "wrappers)",
     "the kernel's own argument checks run: another type (AssertionError, KeyError, ...) "
     "is what a user's `except` clause would see"),
)


def is_binding_class(invalid: str) -> bool:
    """Whether an invalid class is rejected at the binding (see the module docstring)."""
    return invalid in BINDING_CLASSES


def exception_chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what it wraps: ``__cause__`` always, ``__context__`` below a wrapper of
    torch._dynamo or torch._inductor (they re-raise ``from None``), inner first last."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        inner = current.__cause__
        if inner is None and type(current).__module__.startswith(_WRAPPER_MODULES):
            inner = current.__context__ or getattr(current, "inner_exception", None)
        current = inner


def raised_as(exc: BaseException, expected: type[BaseException]) -> BaseException | None:
    """The exception of ``exc``'s chain whose type is exactly ``expected``, or None."""
    return next((e for e in exception_chain(exc) if type(e) is expected), None)


def binding_type_ok(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it wraps) is of a type the public bindings raise."""
    return any(isinstance(e, BINDING_TYPES) for e in exception_chain(exc))


def addressing_strides(shape: tuple[int, ...],
                       strides: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """(dim, stride) of every dim whose stride moves an address: dims of more than one
    element, and none at all for an empty tensor."""
    if any(n == 0 for n in shape):
        return ()
    return tuple((d, s) for d, (n, s) in enumerate(zip(shape, strides, strict=True)) if n > 1)
