"""diagfuzz's built-in implementations, and where ``--impl`` is loaded from.

``diagfuzz.impl:triton_aten`` (the default) reaches diagfuzz's Triton kernels through aten
with the registration on; ``diagfuzz.impl:aten`` is aten's own kernels (a reference and a
sanity target; ``diagfuzz.oracles.aten``, which the oracle's references use). Both provide
every op of ``diagfuzz.specs``: each method calls the op's aten overloads, so a new spec
needs nothing here.

``--impl registered:MODULE[:CALLABLE]`` tests a library the way its users call it: MODULE
is imported (and CALLABLE, such as ``enable``, called) so that it registers its kernels
into aten, and every Case calls aten's public op (``RegisteredLibrary``); the oracle
proves per Case that one of the library's kernels served the call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch

from diagfuzz.core import dispatch
from diagfuzz.core.impl import (
    Impl,
    ImplError,
    capabilities,
    declared_dtypes,
    import_roots,
    provided_ops,
    provides,
    unsupported,
    use_roots,
)
from diagfuzz.core.impl import load_impl as _load_module_impl
from diagfuzz.core.impl import locate_impl as locate_impl  # re-exported
from diagfuzz.core.roots import DEFAULT_IMPL as DEFAULT_IMPL  # re-exported
from diagfuzz.core.roots import REGISTERED as REGISTERED  # re-exported
from diagfuzz.core.runtime import DISPATCH_KEY
from diagfuzz.oracles.aten import (
    AtenReference,
    AtenWithOut,
    aten,
    aten_with_out,
    overload,
    with_every_op,
)


def _registered_calls(functional: str, out_overload: str
                      ) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The functional and ``.out`` methods of one op: aten's overloads, with diagfuzz's
    kernels registered."""

    def call(self: Any, *args: Any) -> Any:
        import diagfuzz.ops as ops

        ops.enable()
        return overload(functional)(*args)

    def call_out(self: Any, *args: Any, out: torch.Tensor) -> Any:
        import diagfuzz.ops as ops

        ops.enable()
        return overload(out_overload)(*args, out=out)

    return call, call_out


class TritonViaAten:
    """diagfuzz's own Triton kernels, reached through aten with the registration on."""

    uses_triton_registration = True

    @staticmethod
    def registration() -> Any:
        """A context in which aten's ops reach diagfuzz's kernels (torch.compile parity
        compiles with it)."""
        import diagfuzz.ops as ops

        return ops.use_triton(True)


with_every_op(TritonViaAten, _registered_calls, out=True)
triton_aten = TritonViaAten()



def _public_calls(functional: str, out_overload: str
                  ) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The functional and ``.out`` methods of one op: aten's public overloads, served by
    whatever is registered."""

    def call(self: Any, *args: Any) -> Any:
        return overload(functional)(*args)

    def call_out(self: Any, *args: Any, out: torch.Tensor) -> Any:
        return overload(out_overload)(*args, out=out)

    return call, call_out


class _PublicAten:
    """Every op through aten's public overloads (``RegisteredLibrary`` keeps those its
    library serves)."""


with_every_op(_PublicAten, _public_calls, out=True)


def _serving_keys(key: str = DISPATCH_KEY) -> tuple[str, ...]:
    """The dispatch keys whose registration serves a call on ``key``'s device."""
    return (key, f"Autograd{key}", "Autograd", "CompositeImplicitAutograd",
            "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional")


class RegisteredLibrary:
    """A library under test through its aten registrations: each method calls aten's
    public op, served by the library's kernel where it registered one.

    It provides the ops for which the library registered a kernel that serves this
    device (the op's own overload, or one it decomposes into: ``OpSpec.decomposes_into``),
    named in ``ops``; ``.out`` methods where the ``.out`` overload is registered.
    ``registered_package`` tells the oracle whose kernels must have run
    (``diagfuzz.core.dispatch.overrides``).
    """

    def __init__(self, package: str, spec: str) -> None:
        from diagfuzz.specs import all_specs

        self.registered_package = package
        self.spec = spec
        registered = {r.op.removeprefix("aten::"): r for r in dispatch.overrides(package)
                      if r.key in _serving_keys()}
        self.served: dict[str, list[dispatch.Registration]] = {}
        self.calls_of: dict[str, str] = {}
        for op_spec in all_specs():
            functional, out = op_spec.aten
            names = (functional, f"{functional}.default", *op_spec.decomposes_into)
            found = [registered[n] for n in names if n in registered]
            if found:
                self.served[op_spec.name] = found
                self.calls_of[op_spec.name] = functional
                setattr(self, op_spec.method_name,
                        getattr(_PublicAten(), op_spec.method_name))
            out_found = [registered[n] for n in (out,) if out and n in registered]
            if out_found:
                setattr(self, op_spec.out_method, getattr(_PublicAten(), op_spec.out_method))
        self.ops = tuple(self.served)

    def calls(self) -> int:
        """Calls of the library's kernels so far (the oracle's proof that one ran)."""
        return sum(r.calls for r in dispatch.overrides(self.registered_package))

    def describe(self, ops: Iterable[str] | None = None) -> list[str]:
        """One line per op (of ``ops``, when given): what a Case calls and which kernel
        serves it."""
        wanted = None if ops is None else set(ops)
        return [f"{op}: torch.ops.aten.{self.calls_of[op]} → " + "; ".join(
                    f"{r.op.removeprefix('aten::')} {r.key} kernel registered by "
                    f"{self.registered_package} ({r.where})" for r in found)
                for op, found in self.served.items() if wanted is None or op in wanted]

    def __repr__(self) -> str:
        return f"RegisteredLibrary({self.spec!r})"


def _load_registered(spec: str) -> RegisteredLibrary:
    """``registered:MODULE[:CALLABLE]``: import MODULE (its import may register), call
    CALLABLE (``enable``, ``use_gems().__enter__`` ...), and keep what it registered."""
    target = spec.removeprefix(REGISTERED)
    module_name, _, attr = target.partition(":")
    dispatch.watch()
    module: Any = _load_module_impl(f"{module_name}:", allow_no_ops=True)
    if attr:
        enable: Any = module
        for part in attr.split("."):
            enable = getattr(enable, part, None)
        if not callable(enable):
            raise ImplError(f"--impl {spec!r}: {module_name!r} has no callable {attr!r}")
        try:
            enable()
        except Exception as exc:
            raise ImplError(f"--impl {spec!r}: {module_name}.{attr}() failed: "
                            f"{exc!r}") from exc
    package = dispatch.package_of(module_name)
    library = RegisteredLibrary(package, spec)
    if not library.served:
        registered = dispatch.overrides(package)
        found = "; ".join(r.describe() for r in registered[:6]) or "nothing"
        switches = [name for name in ("enable", "use_gems", "register")
                    if callable(getattr(module, name, None))]
        hint = (f"; to call its switch: --impl registered:{module_name}:{switches[0]}"
                if switches and not attr else "")
        raise ImplError(
            f"--impl {spec!r}: {package} registered no kernel of the diagonal family "
            f"that serves {DISPATCH_KEY} tensors (registered: {found}); a registration "
            f"through torch.library.Library('aten', 'IMPL').impl is what this mode "
            f"tests{hint}")
    return library


def load_impl(spec: str) -> Any:
    """The implementation ``--impl`` names: ``MODULE:ATTR`` (an object of functions),
    or ``registered:MODULE[:CALLABLE]`` (a library through its aten registrations)."""
    if spec.startswith(REGISTERED):
        return _load_registered(spec)
    return _load_module_impl(spec)


class ReferenceReplaced(RuntimeError):
    """Loading the implementation changed a reference: diagfuzz cannot judge it."""


def load_proven(spec: str, device: str) -> tuple[Any, str]:
    """``load_impl(spec)``, and the proof that its loading changed no reference: the canary
    references (``diagfuzz.oracles.reference.fingerprint``) before and after it, bit for
    bit. Returns the impl and a line saying what was proven; raises ReferenceReplaced
    naming the Cases whose references changed."""
    from diagfuzz.oracles.reference import fingerprint

    before = fingerprint(device)
    impl = load_impl(spec)
    deferred = len(dispatch.overrides())
    if not deferred:
        return impl, f"references: aten's own ({len(before)} canary references; nothing " \
                     "registered into aten)"
    after = fingerprint(device)
    changed = [case for (case, a), (_, b) in zip(before, after, strict=True) if a != b]
    if changed:
        raise ReferenceReplaced(
            f"loading --impl {spec} changed {len(changed)} of {len(before)} canary "
            f"references (e.g. {changed[0]}): a registration diagfuzz cannot defer "
            f"replaced aten's own kernel ({'; '.join(dispatch.unisolated(_family())[:3])})")
    return impl, (f"references: aten's own: {len(before)} canary references bit-identical "
                  f"before and after loading the impl, {deferred} aten registration(s) "
                  "deferred while diagfuzz judges")


def _family() -> list[str]:
    from diagfuzz.specs import all_specs

    return sorted({f"aten::{n}" for s in all_specs() for n in s.aten if n})


def registration_lines(impl: Any, proof: str = "",
                       ops: Iterable[str] | None = None) -> list[str]:
    """What a run says at its start about the libraries registered into aten: the calls a
    ``RegisteredLibrary`` makes (for ``ops``, the ops the run judges, when given), and for
    any impl the registrations its loading left (which diagfuzz's references defer,
    ``proof`` saying how that was proven) and those it cannot defer."""
    describe = getattr(impl, "describe", None)
    lines = [f"calls: {line}" for line in (describe(ops) if callable(describe) else [])]
    if proof and dispatch.overrides():
        lines.append(f"{proof} (each executor proves the same on its device before it "
                     "judges)")
    package = getattr(impl, "registered_package", None)
    others = [r for r in dispatch.overrides() if r.module != package
              and r.module != "diagfuzz.ops"]
    if others:
        packages = sorted({r.module for r in others})
        lines.append(f"warning: {', '.join(packages)} registered {len(others)} aten "
                     f"kernel(s) (e.g. {others[0].describe()}): they replace aten's own for "
                     "every caller; diagfuzz's references defer them (aten's own kernels)")
    stuck = dispatch.unisolated(_family())
    if stuck:
        lines.append(f"warning: {len(stuck)} registration(s) diagfuzz cannot defer (C++ or "
                     f"made before diagfuzz loaded), so a reference may be the library's: "
                     f"{'; '.join(stuck[:4])}")
    return lines


__all__ = [
    "DEFAULT_IMPL",
    "REGISTERED",
    "AtenReference",
    "AtenWithOut",
    "Impl",
    "ImplError",
    "RegisteredLibrary",
    "TritonViaAten",
    "aten",
    "aten_with_out",
    "capabilities",
    "declared_dtypes",
    "import_roots",
    "load_impl",
    "locate_impl",
    "provided_ops",
    "provides",
    "registration_lines",
    "triton_aten",
    "unsupported",
    "use_roots",
]
