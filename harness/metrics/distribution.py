"""Verify a random op's output by its distribution, not its values.

A random op (ATen's `nondeterministic_seeded` tag: rand, randn, randint, bernoulli, normal,
multinomial, ...) draws different values in torch and in the backend, so an element-wise
comparison says nothing. Instead the backend's draw is checked against the op's own law, whose
parameters come from the op's arguments (`law_of`):

- shape and dtype equal to torch's draw;
- support: every value inside the law's range (integers for integer laws, distinct indices per
  row for multinomial without replacement);
- first moment: the draws standardised by the law's per-element mean and standard deviation
  have mean 0 within `z_bound / sqrt(n)`;
- second moment: their mean square is 1 within `z_bound * sqrt(sum(kurtosis_i - 1)) / n`.

`z_bound` and its justification are data (data/distribution.json). The result is a
`Comparison` (so rows and reports keep one shape) whose `tolerance_ratio` is the larger
standardised deviation over `z_bound`, with the statistics in its note and `DistributionCheck`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np

from harness.metrics.arrays import as_array
from harness.metrics.comparison import Comparison, dtype_name

DISTRIBUTION_PATH = "data/distribution.json"
CHECK = "distribution"  # OpRecord.check of rows verified here


@lru_cache(maxsize=1)
def z_bound() -> float:
    """How many standard deviations a sample moment may stray (data/distribution.json)."""
    return float(json.loads(resources.files("harness.metrics").joinpath(DISTRIBUTION_PATH).read_text())["z_bound"])


@dataclass(frozen=True)
class Law:
    """A distribution per element: mean, standard deviation and kurtosis (scalars or arrays
    broadcast to the draw's shape; NaN where the element's moments are not tested), support
    [low, high] (`high_open`: high excluded), integer-valued or not."""

    name: str
    mean: Any
    std: Any
    kurtosis: Any
    low: float = -math.inf
    high: float = math.inf
    high_open: bool = False
    integral: bool = False
    distinct_rows: bool = False  # each row of the last axis holds distinct values


@dataclass
class DistributionCheck:
    """The statistics of one draw against its law."""

    name: str
    law: str
    count: int  # draws whose moments were tested
    mean_z: float  # first moment's deviation, in its standard deviations
    second_z: float  # second moment's deviation, in its standard deviations
    outside_support: int
    repeated_in_row: int
    z_bound: float

    @property
    def ratio(self) -> float:
        """The larger deviation over the bound (inf when a value is outside the support)."""
        if self.outside_support or self.repeated_in_row:
            return math.inf
        return max(abs(self.mean_z), abs(self.second_z)) / self.z_bound

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        return (f"distribution ({self.law}): {self.count} draws, mean {self.mean_z:+.2f} and second moment "
                f"{self.second_z:+.2f} standard deviations from the law's (bound {self.z_bound:g}); "
                f"{self.outside_support} outside the support"
                + (f", {self.repeated_in_row} repeated within a row" if self.repeated_in_row else ""))


def check_distribution(actual: Any, law: Law, name: str = "") -> DistributionCheck:
    """The statistics of `actual` (the backend's draw) against `law`."""
    values = as_array(actual).astype(np.float64)
    mean, std, kurtosis = (np.broadcast_to(np.asarray(p, dtype=np.float64), values.shape) for p in
                           (law.mean, law.std, law.kurtosis))
    above = values >= law.high if law.high_open else values > law.high
    outside = (values < law.low) | above | ~np.isfinite(values)
    if law.integral:
        outside |= values != np.round(values)
    degenerate = std == 0  # a point mass: the draw must be the mean
    outside |= degenerate & (values != mean)
    tested = ~np.isnan(mean) & ~degenerate & ~outside
    z = (values[tested] - mean[tested]) / std[tested]
    count = int(z.size)
    spread = float(np.sum(kurtosis[tested] - 1.0))
    mean_z = float(z.sum() / math.sqrt(count)) if count else 0.0
    second_z = float(np.sum(z * z - 1.0) / math.sqrt(spread)) if count and spread > 0 else 0.0
    repeated = 0
    if law.distinct_rows and values.ndim and values.shape[-1] > 1:
        rows = np.sort(values.reshape(-1, values.shape[-1]), axis=-1)
        repeated = int(np.sum(rows[:, 1:] == rows[:, :-1]))
    return DistributionCheck(name, law.name, count, mean_z, second_z, int(outside.sum()), repeated, z_bound())


def compare_distribution(actual: Any, expected: Any, law: Law, *, name: str = "") -> Comparison:
    """`actual` (the backend's draw) against `law`, with torch's draw `expected` giving the
    shape and dtype it must have. A Comparison whose note carries the statistics."""
    a, b = as_array(actual), as_array(expected)
    result = Comparison(name=name, shape_actual=list(a.shape), shape_expected=list(b.shape),
                        dtype_actual=dtype_name(a.dtype), dtype_expected=dtype_name(b.dtype), atol=0.0, rtol=0.0)
    result.dtype_match = a.dtype == b.dtype
    result.shape_match = a.shape == b.shape
    if not result.shape_match:
        result.tolerance_ratio = result.normalized = math.inf
        result.note = "distribution: the shapes differ"
        return result
    check = check_distribution(a, law, name)
    result.tolerance_ratio = check.ratio
    result.mismatch_fraction = check.outside_support / a.size if a.size else 0.0
    result.note = check.describe()
    result.passed = result.dtype_match and check.ratio <= 1.0
    return result


# -- the laws of ATen's random ops, from their arguments ---------------------------------------

Args = Sequence[Any]
LawBuilder = Callable[[Args, Mapping[str, Any]], "Law | tuple[Law, ...]"]


def _arg(args: Args, kwargs: Mapping[str, Any], index: int, key: str, default: Any) -> Any:
    if index < len(args):
        return args[index]
    return kwargs.get(key, default)


def _number(value: Any) -> Any:
    """A scalar as float, an array as float64 array."""
    array = np.asarray(value, dtype=np.float64)
    return float(array) if array.ndim == 0 else array


def uniform(low: float, high: float) -> Law:
    return Law("uniform", (low + high) / 2, (high - low) / math.sqrt(12), 1.8, low, high, high_open=True)


def normal(mean: Any, std: Any) -> Law:
    return Law("normal", mean, std, 3.0)


def integers(low: float, high: float) -> Law:
    """Uniform on the integers low .. high - 1."""
    count = high - low
    variance = (count * count - 1) / 12
    kurtosis = 3 - 6 * (count * count + 1) / (5 * (count * count - 1)) if count > 1 else 1.0
    return Law("integers", (low + high - 1) / 2, math.sqrt(variance), kurtosis, low, high - 1, integral=True)


def bernoulli(p: Any) -> Law:
    p = np.clip(_number(p), 0.0, 1.0)
    pq = p * (1 - p)
    with np.errstate(divide="ignore", invalid="ignore"):
        kurtosis = np.where(pq > 0, (1 - 3 * pq) / np.where(pq > 0, pq, 1), 1.0)
    return Law("bernoulli", p, np.sqrt(pq), kurtosis, 0.0, 1.0, integral=True)


def exponential(rate: float) -> Law:
    return Law("exponential", 1 / rate, 1 / rate, 9.0, 0.0)


def categorical(weights: Any, num_samples: int, replacement: bool) -> Law:
    """multinomial's indices per row. Without replacement only the first draw of a row follows
    the weights; the rest are tested for support and distinctness only."""
    w = np.asarray(weights, dtype=np.float64)
    w = w.reshape(-1, w.shape[-1]) / w.reshape(-1, w.shape[-1]).sum(axis=-1, keepdims=True)
    index = np.arange(w.shape[-1], dtype=np.float64)
    mean = (w * index).sum(-1, keepdims=True)
    variance = (w * (index - mean) ** 2).sum(-1, keepdims=True)
    fourth = (w * (index - mean) ** 4).sum(-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        kurtosis = np.where(variance > 0, fourth / np.where(variance > 0, variance, 1) ** 2, 1.0)
    shape = (*np.asarray(weights).shape[:-1], num_samples)
    columns = np.ones(num_samples) if replacement else np.r_[1.0, np.full(num_samples - 1, np.nan)]
    per_row = lambda stat: (np.broadcast_to(stat, (w.shape[0], num_samples)) * columns).reshape(shape)  # noqa: E731
    return Law("categorical", per_row(mean), per_row(np.sqrt(variance)), per_row(kurtosis), 0.0,
               float(w.shape[-1] - 1), integral=True, distinct_rows=not replacement)


def rrelu(x: Any, lower: float, upper: float) -> tuple[Law, Law]:
    """Training rrelu's (output, noise): negative elements times a slope uniform on [lower, upper),
    the others kept (slope 1)."""
    x = np.asarray(x, dtype=np.float64)
    negative = x < 0
    slope = uniform(lower, upper)
    ones = np.ones_like(x)
    noise = Law("rrelu slopes", np.where(negative, slope.mean, 1.0), np.where(negative, slope.std, 0.0),
                np.where(negative, slope.kurtosis, 1.0))
    output = Law("rrelu", x * noise.mean, np.abs(x) * noise.std, noise.kurtosis * ones)
    return output, noise


LAWS: dict[str, LawBuilder] = {
    "aten.rand.default": lambda a, k: uniform(0.0, 1.0),
    "aten.rand_like.default": lambda a, k: uniform(0.0, 1.0),
    "aten.uniform.default": lambda a, k: uniform(float(_arg(a, k, 1, "from", 0.0)), float(_arg(a, k, 2, "to", 1.0))),
    "aten.randn.default": lambda a, k: normal(0.0, 1.0),
    "aten.randn_like.default": lambda a, k: normal(0.0, 1.0),
    "aten.normal_functional.default": lambda a, k: normal(float(_arg(a, k, 1, "mean", 0.0)), float(_arg(a, k, 2, "std", 1.0))),
    "aten.normal.Tensor_float": lambda a, k: normal(_number(a[0]), _number(_arg(a, k, 1, "std", 1.0))),
    "aten.normal.float_Tensor": lambda a, k: normal(_number(a[0]), _number(a[1])),
    "aten.normal.Tensor_Tensor": lambda a, k: normal(_number(a[0]), _number(a[1])),
    "aten.normal.float_float": lambda a, k: normal(float(a[0]), float(a[1])),
    "aten.randint.low": lambda a, k: integers(float(a[0]), float(a[1])),
    "aten.randint.default": lambda a, k: integers(0.0, float(a[0])),
    "aten.randint_like.default": lambda a, k: integers(0.0, float(a[1])),
    "aten.randint_like.low_dtype": lambda a, k: integers(float(a[1]), float(a[2])),
    "aten.bernoulli.p": lambda a, k: bernoulli(float(_arg(a, k, 1, "p", 0.5))),
    "aten.bernoulli.default": lambda a, k: bernoulli(_number(a[0])),
    "aten.exponential.default": lambda a, k: exponential(float(_arg(a, k, 1, "lambd", 1.0))),
    "aten.multinomial.default": lambda a, k: categorical(a[0], int(a[1]), bool(_arg(a, k, 2, "replacement", False))),
    "aten.rrelu_with_noise_functional.default": lambda a, k: rrelu(a[0], float(_arg(a, k, 2, "lower", 0.125)),
                                                                   float(_arg(a, k, 3, "upper", 1 / 3))),
}

# Overloads that draw only when an argument says so (index, name): rrelu only in training.
DRAWS_WHEN = {"aten.rrelu_with_noise_functional.default": (4, "training")}


def draws(target: str, args: Args, kwargs: Mapping[str, Any] | None = None) -> bool:
    """Whether a call of random op `target` with `args` draws (rrelu in eval does not)."""
    if target not in DRAWS_WHEN:
        return True
    index, key = DRAWS_WHEN[target]
    return bool(_arg(list(args), dict(kwargs or {}), index, key, False))


def law_of(target: str, args: Args, kwargs: Mapping[str, Any] | None = None) -> Law | tuple[Law, ...] | None:
    """The law of random op `target` called with `args` (tensors as arrays, scalars as numbers);
    None for an op without a known law (its row then says it could not be verified)."""
    builder = LAWS.get(target)
    return builder(list(args), dict(kwargs or {})) if builder is not None else None  # a Law, or one per output
