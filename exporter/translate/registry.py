"""Registry of symbolic functions, keyed by ATen overload and dispatched by opset.

A target is an overload name. Every spelling of it is accepted and normalised to
`aten.add.Tensor` (the str() of the OpOverload): `"aten::add.Tensor"`, `"aten::relu"` (the
default overload) and `torch.ops.aten.add.Tensor` itself. Each target keeps one function per
opset range: the entry registered `since` the highest opset at or below the target opset wins.
User registrations win over the built-ins; `custom_symbolics=` at export time wins over both.

Complex tensors travel as (..., 2) real pairs (exporter/translate/symbolics/fft.py). A symbolic
declares at registration whether it reads that layout: `takes_complex=True` for one that accepts
complex operands as well as real ones (the FFTs, the complex views), `complex_operands=True` for
the form of an op used only when a node reads or makes a complex tensor (complex `mul`, `abs`).
Any other op on a complex value is reported unsupported.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from exporter.errors import ExportError

SymbolicFn = Callable[..., Any]

MIN_OPSET = 17
MAX_OPSET = 26
DEFAULT_OPSET = 18


def check_opset(opset_version: int | None) -> int:
    """The opset to export at: `DEFAULT_OPSET` for None; ExportError outside MIN..MAX."""
    opset = DEFAULT_OPSET if opset_version is None else int(opset_version)
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise ExportError(
            f"opset_version={opset} is outside the supported range {MIN_OPSET}..{MAX_OPSET} "
            f"(onnxruntime 1.31 runs up to {MAX_OPSET}); pick one inside it"
        )
    return opset


def normalize_target(target: Any) -> str:
    """Canonical name of an op overload: 'aten.add.Tensor', '_operator.mul'."""
    if not isinstance(target, str):
        if hasattr(target, "_schema") or type(target).__name__ == "OpOverload":
            return str(target)
        if type(target).__name__ == "OpOverloadPacket":
            return f"{target}.default"
        module = getattr(target, "__module__", None) or "builtins"
        return f"{module}.{getattr(target, '__name__', repr(target))}"
    name = target.strip()
    if "::" in name:
        namespace, _, rest = name.partition("::")
        name = f"{namespace}.{rest}" if "." in rest else f"{namespace}.{rest}.default"
    return name


@dataclass(frozen=True)
class SymbolicEntry:
    target: str
    fn: SymbolicFn
    since_opset: int
    origin: str  # "builtin" | "user" | "call"
    takes_complex: bool = False  # reads complex operands in the (..., 2) layout as well as real ones

    @property
    def location(self) -> str:
        """file:line of the symbolic function, for error messages."""
        try:
            return f"{inspect.getsourcefile(self.fn)}:{inspect.getsourcelines(self.fn)[1]}"
        except (TypeError, OSError):
            return repr(self.fn)


class SymbolicRegistry:
    """Symbolic functions for one origin (built-in or user)."""

    def __init__(self, origin: str) -> None:
        self.origin = origin
        self._entries: dict[str, list[SymbolicEntry]] = {}

    def register(self, target: Any, fn: SymbolicFn, *, opset: int | None = None, takes_complex: bool = False) -> None:
        key = normalize_target(target)
        since = MIN_OPSET if opset is None else opset
        if self.origin == "builtin":
            clash = next((e for e in self._entries.get(key, []) if e.since_opset == since and e.fn is not fn), None)
            if clash is not None:  # two families translating one overload: one would silently win
                new = SymbolicEntry(key, fn, since, self.origin)
                raise ValueError(f"two built-in symbolics for {key} since opset {since}: {clash.location} and "
                                 f"{new.location}; keep one (users override built-ins with register_symbolic)")
        entries = [e for e in self._entries.get(key, []) if e.since_opset != since]
        entries.append(SymbolicEntry(key, fn, since, self.origin, takes_complex))
        self._entries[key] = sorted(entries, key=lambda e: e.since_opset)

    def unregister(self, target: Any) -> None:
        self._entries.pop(normalize_target(target), None)

    def entries(self, target: str) -> list[SymbolicEntry]:
        return self._entries.get(target, [])

    def targets(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, target: object) -> bool:
        return normalize_target(target) in self._entries


BUILTINS = SymbolicRegistry("builtin")
USER = SymbolicRegistry("user")
COMPLEX_FORMS = SymbolicRegistry("builtin")  # ops' forms for complex operands, beside their real ones


def symbolic(*targets: str, since: int | None = None, takes_complex: bool = False,
             complex_operands: bool = False) -> Callable[[SymbolicFn], SymbolicFn]:
    """Decorator registering a built-in symbolic for one or more overloads.

    `takes_complex`: it also reads complex operands as (..., 2) real pairs. `complex_operands`:
    it is the form of these ops used only when a node reads or makes a complex tensor (the
    overloads' real symbolics are registered apart).
    """

    def decorate(fn: SymbolicFn) -> SymbolicFn:
        for target in targets:
            if complex_operands:
                COMPLEX_FORMS.register(target, fn, takes_complex=True)
            else:
                BUILTINS.register(target, fn, opset=since, takes_complex=takes_complex)
        return fn

    return decorate


def register_symbolic(target: Any, fn: SymbolicFn, *, opset: int | None = None, takes_complex: bool = False) -> None:
    """Register a user symbolic `fn(g, *args)` for `target`; it overrides any built-in.

    `opset` is the lowest opset the function supports (default: every supported opset).
    `takes_complex`: `fn` reads complex operands as (..., 2) real pairs (real part, imaginary
    part on a trailing axis); without it a node on complex tensors is reported unsupported.
    """
    USER.register(target, fn, opset=opset, takes_complex=takes_complex)


def unregister_symbolic(target: Any) -> None:
    """Remove a user symbolic; built-ins are untouched."""
    USER.unregister(target)


class Dispatcher:
    """Finds the symbolic for a target at one opset, honouring overrides."""

    def __init__(self, opset_version: int, overrides: Mapping[Any, SymbolicFn] | None = None) -> None:
        self.opset_version = opset_version
        self.call = SymbolicRegistry("call")
        for target, fn in (overrides or {}).items():
            self.call.register(target, fn)
        self._layers = (self.call, USER, BUILTINS)

    def lookup(self, target: Any) -> SymbolicEntry | str:
        """The entry to use, or the reason there is none."""
        key = normalize_target(target)
        too_new: list[int] = []
        for layer in self._layers:
            entries = layer.entries(key)
            usable = [e for e in entries if e.since_opset <= self.opset_version]
            if usable:
                return usable[-1]
            too_new += [e.since_opset for e in entries]
        if too_new:
            return f"its symbolic needs opset >= {min(too_new)} (exporting at {self.opset_version})"
        return "no symbolic function is registered for it"

    def lookup_complex(self, target: Any, does: str = "reads") -> SymbolicEntry | str:
        """The form of `target` for a node that `does` ("reads" or "makes") a complex tensor,
        or why there is none."""
        key = normalize_target(target)
        entries = COMPLEX_FORMS.entries(key)
        if entries:
            return entries[-1]
        return (f"it {does} a complex tensor, which only view_as_real, view_as_complex, the FFTs and "
                f"{', '.join(COMPLEX_FORMS.targets())} translate (complex values are real pairs in the graph)")

    def known_targets(self) -> Iterable[str]:
        """Every target with a symbolic in any layer, at ANY opset (not only this one).

        Capture keeps these ops whole, so the kept set does not depend on the opset: a program
        captured once may be converted at every supported opset (an op whose symbolic needs a
        newer opset is then reported by the conversion, not decomposed differently).
        """
        seen: set[str] = set()
        for layer in self._layers:
            seen.update(layer.targets())
        return sorted(seen)
