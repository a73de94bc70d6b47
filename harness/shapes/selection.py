"""Which sizes a shape sweep verifies, most informative first (plain data, no torch).

A sweep varies the model's independent sizes (`Axis`: a size symbol of the captured program, or
a named ONNX dimension without one) inside their ranges. `select_sizes(axes, count)` returns up
to `count` points (a size per axis), in this order; each point says why it was chosen:

1. traced:       every axis at the size the model was captured at (the reference point);
2. moved:        every axis at once to the smallest prime above its traced size (below it when
                 the range ends there), each axis a different prime: axes that were equal at the
                 trace (square images) differ, and every size is odd and prime, so sizes baked
                 in at the trace (a reshape to the traced batch, a slice that ends at the traced
                 width) and equalities the trace happened to satisfy both break;
3. lower bound:  every axis at its range's lowest size (1 where the range allows it): broadcasts
                 of size-1 dimensions, empty pooling windows;
4. upper bound:  every axis at its range's highest size (`UNBOUNDED_SPAN` past the traced size
                 when the range has no upper bound);
5. guard sides:  for each guard torch.export recorded on an axis (`Axis.guards`: sizes k where
                 the guard's truth changes between k and k + 1), k and k + 1; the i-th point
                 puts every axis at its i-th such size (the others at their traced sizes);
6. one at a time: each axis alone at its 'moved' size, the others traced (which axis breaks);
7. spread:       primes spread over each range (a van der Corput sequence), to fill larger counts;
8. fill:         where a range holds too few primes for the count (a batch of 1 to 8), any sizes
                 spread over it the same way, so that a count the range can hold is always met.

Points repeat nowhere: a point equal to an earlier one is skipped, its reasons merged.
`explicit_sizes` turns a user's list of points into the same records.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

UNBOUNDED_SPAN = 2
"""An axis without an upper bound is swept up to UNBOUNDED_SPAN times its traced size (at
least its traced size + MIN_UNBOUNDED_STEP): far enough to leave the traced size, small enough to run."""
MIN_UNBOUNDED_STEP = 8
SPREAD_POINTS = 64  # how far the spread sequence looks for new points before giving up


@dataclass(frozen=True)
class Guard:
    """A condition torch.export recorded on an axis's size and where it changes truth: between
    `size` and `size + 1`."""

    expression: str
    size: int


@dataclass(frozen=True)
class Axis:
    """One independent size of a sweep.

    `name`: how reports name it (the declared dynamic axis, e.g. "height"); `traced`: its size in
    the example inputs; `lower`/`upper`: the range swept (upper None: unbounded); `guards`: the
    guards on it inside that range.
    """

    name: str
    traced: int
    lower: int
    upper: int | None = None
    guards: tuple[Guard, ...] = ()

    def __post_init__(self) -> None:
        if self.lower < 0 or (self.upper is not None and self.upper < self.lower):
            raise ValueError(f"axis {self.name!r}: range [{self.lower}, {self.upper}] is empty or negative")

    @property
    def top(self) -> int:
        """The highest size swept: `upper`, or UNBOUNDED_SPAN times the traced size."""
        if self.upper is not None:
            return self.upper
        return max(self.traced * UNBOUNDED_SPAN, self.traced + MIN_UNBOUNDED_STEP, self.lower)

    @property
    def bottom(self) -> int:
        """The lowest size swept: the range's lower bound, never 0 (an empty tensor proves little)."""
        return max(self.lower, 1)

    def contains(self, size: int) -> bool:
        return self.bottom <= size <= self.top


@dataclass
class SizePoint:
    """One point of a sweep: a size for every axis, and why it was chosen."""

    sizes: dict[str, int]
    reasons: list[str] = field(default_factory=list)

    def key(self) -> tuple[tuple[str, int], ...]:
        return tuple(sorted(self.sizes.items()))

    def label(self) -> str:
        """'batch 3, height 227': how reports name the point."""
        return ", ".join(f"{name} {size}" for name, size in self.sizes.items()) or "traced"

    def to_dict(self) -> dict[str, Any]:
        return {"sizes": dict(self.sizes), "reasons": list(self.reasons)}


def is_prime(number: int) -> bool:
    if number < 2:
        return False
    if number % 2 == 0:
        return number == 2
    divisor = 3
    while divisor * divisor <= number:
        if number % divisor == 0:
            return False
        divisor += 2
    return True


def _primes_from(start: int, stop: int, step: int) -> Iterator[int]:
    """Primes from `start` towards `stop` (inclusive), upwards (step 1) or downwards (step -1)."""
    for number in range(start, stop + step, step):
        if is_prime(number):
            yield number


def moved_size(axis: Axis, taken: set[int]) -> int:
    """The axis's 'moved' size: the smallest prime above its traced size inside its range, not in
    `taken` (another axis's); else the largest prime below it; else the nearest odd size, then any
    other size; the traced size only when the range holds nothing else."""
    for candidate in (*_primes_from(axis.traced + 1, axis.top, 1), *_primes_from(axis.traced - 1, axis.bottom, -1)):
        if candidate not in taken:
            return candidate
    others = sorted((s for s in range(axis.bottom, axis.top + 1) if s != axis.traced and s not in taken),
                    key=lambda s: (s % 2 == 0, abs(s - axis.traced), s))
    return others[0] if others else axis.traced


def _describe(size: int) -> list[str]:
    found = []
    if size == 1:
        found.append("1")
    if is_prime(size):
        found.append("prime")
    elif size % 2:
        found.append("odd")
    return found


def _moved_point(axes: Sequence[Axis]) -> SizePoint:
    taken: set[int] = set()
    sizes: dict[str, int] = {}
    for axis in axes:
        sizes[axis.name] = moved_size(axis, taken)
        taken.add(sizes[axis.name])
    reasons = ["moved off the traced sizes"]
    kinds = sorted({kind for axis in axes for kind in _describe(sizes[axis.name])})
    reasons += [f"{kind} sizes" for kind in kinds]
    equal = _equal_at_trace(axes)
    if any(len({sizes[name] for name in group}) > 1 for group in equal):
        reasons.append("breaks " + "; ".join(" = ".join(group) for group in equal) + " (equal when traced)")
    return SizePoint(sizes, reasons)


def _equal_at_trace(axes: Sequence[Axis]) -> list[list[str]]:
    groups: dict[int, list[str]] = {}
    for axis in axes:
        groups.setdefault(axis.traced, []).append(axis.name)
    return [names for names in groups.values() if len(names) > 1]


def _guard_points(axes: Sequence[Axis]) -> list[SizePoint]:
    sides: dict[str, list[tuple[int, str]]] = {}
    for axis in axes:
        found: dict[int, str] = {}
        for guard in axis.guards:
            for size in (guard.size, guard.size + 1):
                if axis.contains(size) and size != axis.traced:
                    found.setdefault(size, f"{axis.name} {size}, {guard.expression} changes between "
                                           f"{guard.size} and {guard.size + 1}")
        sides[axis.name] = sorted(found.items())
    points = []
    for index in range(max((len(s) for s in sides.values()), default=0)):
        sizes, reasons = {}, []
        for axis in axes:
            own = sides[axis.name]
            if index < len(own):
                sizes[axis.name], why = own[index]
                reasons.append(f"guard side ({why})")
            else:
                sizes[axis.name] = axis.traced
        points.append(SizePoint(sizes, reasons))
    return points


def _van_der_corput(index: int) -> float:
    value, denominator = 0.0, 1.0
    while index:
        denominator *= 2
        index, remainder = divmod(index, 2)
        value += remainder / denominator
    return value


def _spread_points(axes: Sequence[Axis], *, primes: bool = True) -> Iterator[SizePoint]:
    """Points spread over every range (a van der Corput sequence of fractions), each size moved to
    its nearest prime in the range; with `primes` False, the sizes as they fall (the fill)."""
    for index in range(1, SPREAD_POINTS + 1):
        fraction = _van_der_corput(index)
        sizes = {}
        for axis in axes:
            target = axis.bottom + round(fraction * (axis.top - axis.bottom))
            up = next(_primes_from(target, axis.top, 1), None) if primes else None
            down = next(_primes_from(target, axis.bottom, -1), None) if primes else None
            near = [p for p in (up, down) if p is not None]
            sizes[axis.name] = min(near, key=lambda p: (abs(p - target), p)) if near else target
        yield SizePoint(sizes, [f"spread: {fraction:.3g} of each range" if primes
                                else f"fill: {fraction:.3g} of each range (too few primes in it)"])


def _candidates(axes: Sequence[Axis]) -> Iterator[SizePoint]:
    yield SizePoint({a.name: a.traced for a in axes}, ["traced"])
    moved = _moved_point(axes)
    yield moved
    yield SizePoint({a.name: a.bottom for a in axes},
                    ["lower bounds" + (" (size 1)" if any(a.bottom == 1 for a in axes) else "")])
    yield SizePoint({a.name: a.top for a in axes},
                    ["upper bounds" + (" (unbounded: " + ", ".join(a.name for a in axes if a.upper is None)
                                       + f" at {UNBOUNDED_SPAN}x traced)" if any(a.upper is None for a in axes)
                                       else "")])
    yield from _guard_points(axes)
    if len(axes) > 1:
        for axis in axes:
            sizes = {a.name: a.traced for a in axes}
            sizes[axis.name] = moved.sizes[axis.name]
            yield SizePoint(sizes, [f"{axis.name} alone moved"])
    yield from _spread_points(axes)
    yield from _spread_points(axes, primes=False)


def select_sizes(axes: Sequence[Axis], count: int) -> list[SizePoint]:
    """Up to `count` distinct points, most informative first (the module's order); the first is
    always the traced point. Fewer when the ranges hold fewer distinct points."""
    if count < 1:
        raise ValueError(f"a sweep of {count} sizes: ask for at least 1 (the traced size)")
    chosen: dict[tuple[tuple[str, int], ...], SizePoint] = {}
    for point in _candidates(axes):
        key = point.key()
        if key in chosen:
            if not point.reasons[0].startswith(("spread", "fill")):
                chosen[key].reasons.extend(r for r in point.reasons if r not in chosen[key].reasons)
            continue
        if len(chosen) == count:
            break
        chosen[key] = point
    return list(chosen.values())


def explicit_sizes(axes: Sequence[Axis], points: Sequence[Mapping[str, int]]) -> list[SizePoint]:
    """The traced point, then the given points (each a {axis name: size}; axes left out stay at
    their traced sizes). A name that is no axis, or a size outside the axis's range, is a
    ValueError naming the axes and their ranges."""
    by_name = {axis.name: axis for axis in axes}
    result = [SizePoint({a.name: a.traced for a in axes}, ["traced"])]
    for given in points:
        unknown = sorted(set(given) - set(by_name))
        if unknown:
            raise ValueError(f"shapes names {unknown}, which are not dynamic axes of the model; its axes are "
                             + (", ".join(_range_text(a) for a in axes) or "none (every axis is static)"))
        sizes = {a.name: a.traced for a in axes}
        for name, size in given.items():
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise ValueError(f"shapes gives {name} = {size!r}; sizes are non-negative integers")
            sizes[name] = size
        point = SizePoint(sizes, ["given"])
        if point.key() not in {p.key() for p in result}:
            result.append(point)
    return result


def _range_text(axis: Axis) -> str:
    return f"{axis.name} in [{axis.lower}, {axis.upper if axis.upper is not None else 'unbounded'}]"
