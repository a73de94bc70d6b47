"""Random ops (ATen's `nondeterministic_seeded` family) as ONNX's random generators.

| torch | ONNX |
|---|---|
| rand, rand_like, uniform | RandomUniform(Like), low/high |
| randn, randn_like, normal, normal_functional | RandomNormal(Like), mean/scale (or `mean + std * N(0, 1)` for tensor parameters) |
| randint, randint_like | Floor of a float64 RandomUniform over [low, high), cast |
| bernoulli.p, bernoulli | RandomUniformLike < p (p a float or the tensor's probabilities) |
| multinomial | Multinomial with replacement; without, the Gumbel top-k trick (TopK of log p + Gumbel noise) |
| exponential | `-log(1 - U) / lambd` |
| rrelu (training) | slopes U(lower, upper) for the negative elements; in eval, LeakyRelu with their mean |

The values differ from torch's draws by design: the harness verifies these ops by shape, dtype
and distribution statistics (harness/metrics/distribution.py). Static sizes use the generator's
`shape` attribute; a size known only at run time goes through ConstantOfShape and the `*Like`
form. Draws are made in float or double (onnxruntime's kernels) and cast to other dtypes.

onnxruntime 1.31 implements the generators at their first version only: a model exported at
opset 22 or later (RandomUniform-22, ...) is valid ONNX but onnxruntime cannot load it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from exporter.translate.dtypes import onnx_type
from exporter.translate.graph import Graph, Value
from exporter.translate.registry import symbolic
from exporter.translate.symbolics._helpers import cast_to, int64_vector, rank_of, unsqueeze

_GENERATED = (torch.float32, torch.float64)  # ONNX defines float16 too; onnxruntime 1.31 has no kernel for it


def _generated_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype to draw in: `dtype` when ONNX's generators make it, else float32."""
    return dtype if dtype in _GENERATED else torch.float32


def _draw(g: Graph, kind: str, size: Sequence[Any] | Value, dtype: torch.dtype, **params: float) -> Value:
    """RandomUniform / RandomNormal (`kind`) of `size` (ints and SymInt Values, or a 1-D int64
    shape Value) drawn in `dtype` (a dtype the generators make). A 0-d draw goes through the
    *Like form: an empty `shape` attribute has no type ONNX can infer."""
    attributes = {f"{key}_f": float(value) for key, value in params.items()}
    if not isinstance(size, Value) and size and all(isinstance(s, int) for s in size):
        out = g.op(kind, dtype_i=onnx_type(dtype), shape_i=list(size), **attributes)
    else:
        shape = size if isinstance(size, Value) else int64_vector(g, list(size))
        template = g.op("ConstantOfShape", shape)  # float32 zeros: only its shape is read
        out = g.op(f"{kind}Like", template, dtype_i=onnx_type(dtype), **attributes)
    out.dtype = dtype
    return out


def _like(g: Graph, kind: str, self: Value, dtype: torch.dtype, **params: float) -> Value:
    """A draw of `self`'s shape in `dtype`, cast to the node's dtype."""
    drawn = _draw(g, kind, g.op("Shape", self), _generated_dtype(dtype), **params)
    return _narrowed(g, drawn, kind, dtype, params)


def _narrowed(g: Graph, drawn: Value, kind: str, dtype: torch.dtype, params: dict[str, float]) -> Value:
    """`drawn` cast to `dtype`. A uniform draw on [low, high) narrowed to a coarser float type
    (float16, bfloat16) could round up to `high`; it is clamped to the largest value below."""
    out = cast_to(g, drawn, dtype)
    if kind != "RandomUniform" or drawn.dtype == dtype or not dtype.is_floating_point:
        return out
    high = torch.tensor(params.get("high", 1.0), dtype=dtype)
    return g.op("Min", out, g.constant(torch.nextafter(high, torch.tensor(-math.inf, dtype=dtype))))


@symbolic("aten::rand")
def rand(g: Graph, size, **options) -> Value:
    """rand(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor

    Limits: onnxruntime 1.31 runs ONNX's random generators only below opset 22 (their first versions).
    """
    dtype = g.ctx.output_dtype
    return _narrowed(g, _draw(g, "RandomUniform", size, _generated_dtype(dtype), low=0.0, high=1.0),
                     "RandomUniform", dtype, {"high": 1.0})


@symbolic("aten::randn")
def randn(g: Graph, size, **options) -> Value:
    """randn(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor

    Limits: onnxruntime 1.31 runs ONNX's random generators only below opset 22 (their first versions).
    """
    dtype = g.ctx.output_dtype
    return cast_to(g, _draw(g, "RandomNormal", size, _generated_dtype(dtype), mean=0.0, scale=1.0), dtype)


@symbolic("aten::rand_like")
def rand_like(g: Graph, self: Value, **options) -> Value:
    """rand_like(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor

    Limits: onnxruntime 1.31 runs ONNX's random generators only below opset 22 (their first versions).
    """
    return _like(g, "RandomUniform", self, g.ctx.output_dtype, low=0.0, high=1.0)


@symbolic("aten::randn_like")
def randn_like(g: Graph, self: Value, **options) -> Value:
    """randn_like(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor

    Limits: onnxruntime 1.31 runs ONNX's random generators only below opset 22 (their first versions).
    """
    return _like(g, "RandomNormal", self, g.ctx.output_dtype, mean=0.0, scale=1.0)


@symbolic("aten::uniform")
def uniform(g: Graph, self: Value, low: float = 0.0, high: float = 1.0, **options) -> Value:
    """uniform(Tensor self, float from=0, float to=1, *, Generator? generator=None) -> Tensor

    Limits: onnxruntime 1.31 runs ONNX's random generators only below opset 22 (their first versions).
    """
    return _like(g, "RandomUniform", self, g.ctx.output_dtype, low=low, high=high)


@symbolic("aten::normal_functional")
def normal_functional(g: Graph, self: Value, mean: float = 0.0, std: float = 1.0, **options) -> Value:
    """normal_functional(Tensor self, float mean=0, float std=1, *, Generator? generator=None) -> Tensor

    Limits: onnxruntime 1.31 runs ONNX's random generators only below opset 22 (their first versions).
    """
    return _like(g, "RandomNormal", self, g.ctx.output_dtype, mean=mean, scale=std)


def _integers(g: Graph, size, low: Any, high: Any) -> Value:
    """Integers uniform on [low, high): floor(U[0, 1) * (high - low) + low) in float64 (exact
    for every int32 range), cast to the node's dtype. `low`/`high` may be SymInt Values."""
    unit = _draw(g, "RandomUniform", size, torch.float64, low=0.0, high=1.0)
    low, high = (cast_to(g, v, torch.float64) for v in (low, high))
    span = g.op("Sub", high, low)
    return cast_to(g, g.op("Floor", g.op("Add", g.op("Mul", unit, span), low)), g.ctx.output_dtype)


@symbolic("aten::randint.low")
def randint_low(g: Graph, low, high, size, **options) -> Value:
    """randint.low(SymInt low, SymInt high, SymInt[] size, *, ScalarType? dtype=long, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor

    Limits: onnxruntime 1.31 runs ONNX's random generators only below opset 22 (their first versions).
    """
    return _integers(g, size, low, high)


@symbolic("aten::randint")
def randint(g: Graph, high, size, **options) -> Value:
    """randint(SymInt high, SymInt[] size, *, ScalarType? dtype=long, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor

    Limits: onnxruntime 1.31 runs ONNX's random generators only below opset 22 (their first versions).
    """
    return _integers(g, size, 0, high)


@symbolic("aten::randint_like")
def randint_like(g: Graph, self: Value, high, **options) -> Value:
    """randint_like(Tensor self, SymInt high, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor

    Limits: onnxruntime 1.31 runs ONNX's random generators only below opset 22 (their first versions).
    """
    return _integers(g, g.op("Shape", self), 0, high)


@symbolic("aten::randint_like.low_dtype")
def randint_like_low(g: Graph, self: Value, low, high, **options) -> Value:
    """randint_like.low_dtype(Tensor self, SymInt low, SymInt high, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor

    Limits: onnxruntime 1.31 runs ONNX's random generators only below opset 22 (their first versions).
    """
    return _integers(g, g.op("Shape", self), low, high)


def _normal(g: Graph, shape_of: Value, mean: Any, std: Any) -> Value:
    """`mean + std * N(0, 1)` with the broadcast shape of `shape_of`, in the node's dtype."""
    dtype = g.ctx.output_dtype
    noise = _like(g, "RandomNormal", shape_of, dtype, mean=0.0, scale=1.0)
    return g.op("Add", g.op("Mul", noise, cast_to(g, std, dtype)), cast_to(g, mean, dtype))


@symbolic("aten::normal.Tensor_float")
def normal_tensor_float(g: Graph, mean: Value, std: float = 1.0, **options) -> Value:
    """normal.Tensor_float(Tensor mean, float std=1, *, Generator? generator=None) -> Tensor

    Limits: onnxruntime 1.31 runs ONNX's random generators only below opset 22 (their first versions).
    """
    return _normal(g, mean, mean, std)


@symbolic("aten::normal.float_Tensor")
def normal_float_tensor(g: Graph, mean: float, std: Value, **options) -> Value:
    """normal.float_Tensor(float mean, Tensor std, *, Generator? generator=None) -> Tensor

    Limits: onnxruntime 1.31 runs ONNX's random generators only below opset 22 (their first versions).
    """
    return _normal(g, std, mean, std)


@symbolic("aten::normal.Tensor_Tensor")
def normal_tensor_tensor(g: Graph, mean: Value, std: Value, **options) -> Value:
    """normal.Tensor_Tensor(Tensor mean, Tensor std, *, Generator? generator=None) -> Tensor

    Limits: onnxruntime 1.31 runs ONNX's random generators only below opset 22 (their first versions).
    """
    shape_of = g.op("Add", cast_to(g, mean, g.ctx.output_dtype), cast_to(g, std, g.ctx.output_dtype))
    return _normal(g, shape_of, mean, std)


@symbolic("aten::normal.float_float")
def normal_float_float(g: Graph, mean: float, std: float, size, **options) -> Value:
    """normal.float_float(float mean, float std, SymInt[] size, *, Generator? generator=None, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor

    Limits: onnxruntime 1.31 runs ONNX's random generators only below opset 22 (their first versions).
    """
    dtype = g.ctx.output_dtype
    return cast_to(g, _draw(g, "RandomNormal", size, _generated_dtype(dtype), mean=mean, scale=std), dtype)


@symbolic("aten::bernoulli.p")
def bernoulli_p(g: Graph, self: Value, p: float = 0.5, **options) -> Value:
    """bernoulli.p(Tensor self, float p, *, Generator? generator=None) -> Tensor

    Limits: onnxruntime 1.31 runs ONNX's random generators only below opset 22 (their first versions).
    """
    unit = _like(g, "RandomUniform", self, torch.float32, low=0.0, high=1.0)
    return cast_to(g, g.op("Less", unit, g.constant(float(p), torch.float32)), g.ctx.output_dtype)


@symbolic("aten::bernoulli")
def bernoulli(g: Graph, self: Value, **options) -> Value:
    """bernoulli(Tensor self, *, Generator? generator=None) -> Tensor

    1 with the probability held in each element: `U < p`, U uniform on [0, 1). Not ONNX
    Bernoulli, which onnxruntime 1.31 gets backwards (it draws 1 with probability 1 - p; the
    op table's bernoulli_tensor_probabilities row catches it).

    Limits: onnxruntime 1.31 runs ONNX's random generators only below opset 22 (their first versions).
    """
    probabilities = cast_to(g, self, _generated_dtype(self.dtype))
    unit = _like(g, "RandomUniform", probabilities, probabilities.dtype, low=0.0, high=1.0)
    return cast_to(g, g.op("Less", unit, probabilities), g.ctx.output_dtype)


@symbolic("aten::exponential")
def exponential(g: Graph, self: Value, lambd: float = 1.0, **options) -> Value:
    """exponential(Tensor self, float lambd=1, *, Generator? generator=None) -> Tensor

    Inverse transform: `-log(1 - U) / lambd`, U uniform on [0, 1) (so the log's argument is > 0).

    Limits: onnxruntime 1.31 runs ONNX's random generators only below opset 22 (their first versions).
    """
    dtype = g.ctx.output_dtype
    unit = _draw(g, "RandomUniform", g.op("Shape", self), _generated_dtype(dtype), low=0.0, high=1.0)
    log = g.op("Log", g.op("Sub", g.constant(1.0, unit.dtype), unit))  # in the generated type, then narrowed
    return cast_to(g, g.op("Div", g.op("Neg", log), g.constant(float(lambd), unit.dtype)), dtype)


@symbolic("aten::multinomial")
def multinomial(g: Graph, self: Value, num_samples: int, replacement: bool = False, **options) -> Value:
    """multinomial(Tensor self, SymInt num_samples, bool replacement=False, *, Generator? generator=None) -> Tensor

    `self` holds non-negative weights per row (1-D: one row). With replacement, or one sample,
    ONNX Multinomial on the log-weights. Without replacement, the Gumbel top-k trick: the k
    largest of `log w + G` (G standard Gumbel noise) are k draws without replacement, in draw
    order; zero weights give -inf and are never drawn while positive ones remain.

    Limits: onnxruntime 1.31 runs ONNX's random generators only below opset 22 (their first versions).
    """
    one_row = rank_of(self) == 1
    weights = unsqueeze(g, self, [0]) if one_row else self
    weights = cast_to(g, weights, _generated_dtype(weights.dtype))
    log_weights = g.op("Log", weights)
    if replacement or num_samples == 1:
        out = g.op("Multinomial", log_weights, sample_size_i=int(num_samples), dtype_i=onnx_type(torch.int64))
    else:
        unit = _like(g, "RandomUniform", weights, weights.dtype, low=0.0, high=1.0)
        tiny = g.constant(float(torch.finfo(weights.dtype).tiny), weights.dtype)
        gumbel = g.op("Neg", g.op("Log", g.op("Neg", g.op("Log", g.op("Max", unit, tiny)))))
        _, out = g.op("TopK", g.op("Add", log_weights, gumbel), g.constant([int(num_samples)], torch.int64),
                      axis_i=-1, largest_i=1, sorted_i=1, outputs=2)
    return g.op("Squeeze", out, g.constant([0], torch.int64)) if one_row else out


@symbolic("aten::rrelu_with_noise_functional")
def rrelu_with_noise_functional(g: Graph, self: Value, noise: Value, lower: float = 0.125, upper: float = 1 / 3,
                                training: bool = False, generator: None = None) -> tuple[Value, Value]:
    """rrelu_with_noise_functional(Tensor self, Tensor noise, Scalar lower=0.125, Scalar upper=0.33333333333333331, bool training=False, Generator? generator=None) -> (Tensor, Tensor noise_out)

    Training: each negative element times a slope drawn uniformly from [lower, upper), the
    slopes (1 for the others) as the noise output. Eval: LeakyRelu with the mean slope, the
    noise passed through, as torch leaves it.

    Limits: onnxruntime 1.31 runs ONNX's random generators only below opset 22 (their first versions).
    """
    if not training:
        return g.op("LeakyRelu", self, alpha_f=(float(lower) + float(upper)) / 2), g.op("Identity", noise)
    slope = _like(g, "RandomUniform", self, self.dtype, low=float(lower), high=float(upper))
    negative = g.op("Less", self, g.constant(0.0, self.dtype))
    slope = g.op("Where", negative, slope, g.constant(1.0, self.dtype))
    return g.op("Mul", self, slope), slope
