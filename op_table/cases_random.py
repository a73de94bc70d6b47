"""Random ops: rand, randn, randint, normal, uniform, bernoulli, exponential, multinomial.

Their values are draws, so each row has a `law`: the distribution of its output, from the
inputs. The runner checks shape, dtype, support and the first two moments against it
(harness.metrics.distribution) instead of values. Samples hold a few thousand draws, enough
for a wrong law (a scale off by 10%, a shifted mean) to fail.
"""

from __future__ import annotations

import torch

from harness.metrics import distribution as law

from ._samples import op as _op, positive, randn
from .schema import OpCase

BATCH = {"args_0": {0: "batch"}}
# onnxruntime 1.31 has kernels for the generators' first versions only (RandomUniform-1 ...,
# Bernoulli-15, Multinomial-7); opset 22 revised them all, so 21 is the newest it runs.
OPSETS = (17, 18, 21)


def op(*args, **fields) -> OpCase:
    return _op(*args, opsets=OPSETS, **fields)


def _probabilities(gen: torch.Generator) -> tuple[torch.Tensor]:
    return (torch.rand(64, 48, generator=gen),)


def _weights(gen: torch.Generator) -> tuple[torch.Tensor]:
    """Multinomial weights per row, some zero (never drawn)."""
    weights = torch.rand(256, 12, generator=gen)
    return (weights * (weights > 0.2),)


UNIFORM = [
    op("rand_static_float64", lambda x: torch.rand(48, 64, dtype=torch.float64), lambda g: (randn(g, 2, 3),),
       ["aten.rand.default"], law=lambda x: law.uniform(0.0, 1.0)),
    op("rand_dynamic_size", lambda x: torch.rand(x.shape[0], 64), lambda g: (randn(g, 48, 3),),
       ["aten.rand.default", "aten.sym_size.int"], dynamic_axes=BATCH, law=lambda x: law.uniform(0.0, 1.0)),
    op("rand_like", lambda x: torch.rand_like(x), lambda g: (randn(g, 48, 64),), ["aten.rand_like.default"],
       dynamic_axes=BATCH, law=lambda x: law.uniform(0.0, 1.0)),
    op("rand_like_float16", lambda x: torch.rand_like(x, dtype=torch.float16), lambda g: (randn(g, 48, 64),),
       ["aten.rand_like.default"], law=lambda x: law.uniform(0.0, 1.0)),
    op("uniform_in_place", lambda x: x.clone().uniform_(-2.0, 3.0), lambda g: (randn(g, 48, 64),),
       ["aten.uniform.default"], law=lambda x: law.uniform(-2.0, 3.0)),
]

NORMAL = [
    op("randn_dynamic_size", lambda x: torch.randn(x.shape[0], 64), lambda g: (randn(g, 48, 3),),
       ["aten.randn.default", "aten.sym_size.int"], dynamic_axes=BATCH, law=lambda x: law.normal(0.0, 1.0)),
    op("randn_like", lambda x: torch.randn_like(x), lambda g: (randn(g, 48, 64),), ["aten.randn_like.default"],
       law=lambda x: law.normal(0.0, 1.0)),
    op("normal_in_place", lambda x: x.clone().normal_(1.5, 0.5), lambda g: (randn(g, 48, 64),),
       ["aten.normal_functional.default"], law=lambda x: law.normal(1.5, 0.5)),
    op("normal_tensor_mean", lambda x: torch.normal(x, 2.0), lambda g: (randn(g, 48, 64),),
       ["aten.normal.Tensor_float"], dynamic_axes=BATCH, law=lambda x: law.normal(x.numpy(), 2.0)),
    op("normal_tensor_std", lambda s: torch.normal(-1.0, s), lambda g: (positive(g, 48, 64),),
       ["aten.normal.float_Tensor"], law=lambda s: law.normal(-1.0, s.numpy())),
    op("normal_tensor_mean_std", lambda m, s: torch.normal(m, s), lambda g: (randn(g, 48, 64), positive(g, 48, 64)),
       ["aten.normal.Tensor_Tensor"], law=lambda m, s: law.normal(m.numpy(), s.numpy())),
    op("normal_float_float", lambda x: torch.normal(2.0, 0.5, size=(48, 64)), lambda g: (randn(g, 2),),
       ["aten.normal.float_float"], law=lambda x: law.normal(2.0, 0.5)),
]

DISCRETE = [
    op("randint_low_high", lambda x: torch.randint(-3, 9, (48, 64)), lambda g: (randn(g, 2),),
       ["aten.randint.low"], law=lambda x: law.integers(-3, 9)),
    op("randint_high_dynamic", lambda x: torch.randint(7, (x.shape[0], 64)), lambda g: (randn(g, 48, 2),),
       ["aten.randint.default", "aten.sym_size.int"], dynamic_axes=BATCH, law=lambda x: law.integers(0, 7)),
    op("randint_like", lambda x: torch.randint_like(x, 5), lambda g: (randn(g, 48, 64),),
       ["aten.randint_like.default"], law=lambda x: law.integers(0, 5)),
    op("randint_like_low", lambda x: torch.randint_like(x, 2, 6, dtype=torch.int32), lambda g: (randn(g, 48, 64),),
       ["aten.randint_like.low_dtype"], law=lambda x: law.integers(2, 6)),
    op("bernoulli_p", lambda x: torch.bernoulli(x, 0.3), lambda g: (randn(g, 48, 64),), ["aten.bernoulli.p"],
       dynamic_axes=BATCH, law=lambda x: law.bernoulli(0.3)),
    op("bernoulli_tensor_probabilities", torch.bernoulli, _probabilities, ["aten.bernoulli.default"],
       law=lambda p: law.bernoulli(p.numpy())),
    op("exponential_in_place", lambda x: x.clone().exponential_(2.0), lambda g: (randn(g, 48, 64),),
       ["aten.exponential.default"], law=lambda x: law.exponential(2.0)),
    op("multinomial_with_replacement", lambda w: torch.multinomial(w, 16, replacement=True), _weights,
       ["aten.multinomial.default"], dynamic_axes=BATCH, law=lambda w: law.categorical(w.numpy(), 16, True)),
    op("multinomial_without_replacement", lambda w: torch.multinomial(w, 4), _weights,
       ["aten.multinomial.default"], law=lambda w: law.categorical(w.numpy(), 4, False)),
    op("multinomial_one_row", lambda w: torch.multinomial(w[0], 1), _weights,
       ["aten.multinomial.default"], law=lambda w: law.categorical(w[0].numpy(), 1, False)),
]

CASES: list[OpCase] = [*UNIFORM, *NORMAL, *DISCRETE]


def _rrelu(training: bool):
    """rrelu on an explicit noise buffer (F.rrelu makes it with `empty`), output and noise."""
    return lambda x, noise: torch.ops.aten.rrelu_with_noise_functional(x, noise, 0.1, 0.3, training)


RRELU = "aten.rrelu_with_noise_functional.default"
CASES += [
    op("rrelu_training", lambda x, n: _rrelu(True)(x, n), lambda g: (randn(g, 48, 64), torch.zeros(48, 64)), [RRELU],
       law=lambda x, n: law.rrelu(x.numpy(), 0.1, 0.3)),
    op("rrelu_eval_mean_slope", lambda x, n: _rrelu(False)(x, n), lambda g: (randn(g, 4, 5), torch.zeros(4, 5)),
       [RRELU]),
]
