"""Random ops in the harness: rows checked by distribution (harness.metrics.distribution),
planted faults that the check must catch, and ops downstream of a draw isolated on torch's values."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import exporter
import harness
from exporter.translate.registry import BUILTINS
from harness.analysis.draws import random_op, tagged_random
from harness.metrics import distribution as law
from harness.metrics.distribution import LAWS, compare_distribution

DRAWS = (64, 64)


def _rng() -> np.random.Generator:
    return np.random.default_rng(0)


CORRECT = [
    ("uniform", lambda r: r.uniform(-2, 3, DRAWS).astype(np.float32), law.uniform(-2.0, 3.0)),
    ("normal", lambda r: r.normal(1.5, 0.5, DRAWS).astype(np.float32), law.normal(1.5, 0.5)),
    ("integers", lambda r: r.integers(-3, 9, DRAWS), law.integers(-3, 9)),
    ("bernoulli", lambda r: (r.random(DRAWS) < 0.3).astype(np.float32), law.bernoulli(0.3)),
    ("exponential", lambda r: r.exponential(0.5, DRAWS).astype(np.float32), law.exponential(2.0)),
]

# (what is wrong, draws, law they are held to): each must fail
PLANTED = [
    ("scale 10% too large", lambda r: r.normal(0, 1.1, DRAWS).astype(np.float32), law.normal(0.0, 1.0)),
    ("mean shifted by 0.15 std", lambda r: r.normal(0.15, 1, DRAWS).astype(np.float32), law.normal(0.0, 1.0)),
    ("uniform on [0, 1.2)", lambda r: (r.random(DRAWS) * 1.2).astype(np.float32), law.uniform(0.0, 1.0)),
    ("one value at the open end", lambda r: np.where(np.arange(64 * 64).reshape(DRAWS) == 7, 1.0, r.random(DRAWS)),
     law.uniform(0.0, 1.0)),
    ("integers one too high", lambda r: r.integers(1, 8, DRAWS), law.integers(0, 7)),
    ("bernoulli inverted", lambda r: (r.random(DRAWS) >= 0.3).astype(np.float32), law.bernoulli(0.3)),
    ("non-integer draws", lambda r: r.uniform(0, 6, DRAWS), law.integers(0, 7)),
]


@pytest.mark.parametrize(("name", "draw", "expected_law"), CORRECT, ids=[c[0] for c in CORRECT])
def test_a_correct_draw_passes(name, draw, expected_law) -> None:
    values = draw(_rng())
    comparison = compare_distribution(values, values, expected_law, name=name)
    assert comparison.passed, comparison.note
    assert comparison.tolerance_ratio <= 1


@pytest.mark.parametrize(("fault", "draw", "expected_law"), PLANTED, ids=[p[0] for p in PLANTED])
def test_a_planted_fault_fails(fault, draw, expected_law) -> None:
    values = draw(_rng())
    comparison = compare_distribution(values, values, expected_law, name=fault)
    assert not comparison.passed, f"{fault} passed: {comparison.note}"


def test_shape_and_dtype_are_torch_s() -> None:
    values = _rng().random(DRAWS).astype(np.float32)
    assert not compare_distribution(values, values[:10], law.uniform(0.0, 1.0)).passed
    assert not compare_distribution(values, values.astype(np.float64), law.uniform(0.0, 1.0)).passed


def test_multinomial_without_replacement_draws_distinct_indices() -> None:
    weights = np.ones((32, 10))
    rng = _rng()
    distinct = np.stack([rng.permutation(10)[:4] for _ in range(32)])
    repeated = distinct.copy()
    repeated[:, 1] = repeated[:, 0]
    categorical = law.categorical(weights, 4, replacement=False)
    assert compare_distribution(distinct, distinct, categorical).passed
    assert not compare_distribution(repeated, repeated, categorical).passed


def test_every_random_symbolic_has_a_law() -> None:
    """A tagged built-in either has a law or draws only for a dropout its arguments turn off."""
    tagged = [t for t in BUILTINS.targets() if t.startswith("aten.") and tagged_random(t)]
    assert [t for t in tagged if random_op(t)], "no random symbolic is registered"
    for target in tagged:
        if target not in LAWS:
            namespace, name, overload = target.split(".")
            schema = str(getattr(getattr(getattr(torch.ops, namespace), name), overload)._schema)
            assert "dropout" in schema or "train" in schema, f"{target} is random and has no law in LAWS"


class _Noisy(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + 0.1 * torch.randn_like(x)), torch.rand(40, 50)


def test_verify_checks_draws_by_distribution_and_isolates_what_follows() -> None:
    result = harness.verify(_Noisy(), (torch.randn(64, 64),), strict=True)
    rows = {op.aten: op for op in result.ops}
    for target in ("aten.randn_like.default", "aten.rand.default"):
        assert rows[target].check == "distribution" and rows[target].passed, rows[target].to_dict()
        assert "distribution" in rows[target].isolated.note
    for target in ("aten.mul.Tensor", "aten.add.Tensor", "aten.relu.default"):
        row = rows[target]
        assert row.check == "values" and row.passed
        assert row.isolated.max_abs == 0.0  # fed torch's draw, not the backend's
    assert result.passed, [c.to_dict() for c in result.outputs]
    assert "random op" in result.outputs[0].note and "distribution" in result.outputs[1].note


def _wrong_rand(g, size, **options):
    return g.op("RandomUniform", dtype_i=1, shape_i=list(size), low_f=0.0, high_f=2.0)


def test_verify_fails_a_random_op_with_the_wrong_law() -> None:
    model = torch.nn.Module()
    model.forward = lambda x: torch.rand(64, 64) + 0 * x.sum()
    onnx_model = exporter.export(model, (torch.randn(2),), custom_symbolics={"aten::rand": _wrong_rand})
    result = harness.verify(model, (torch.randn(2),), onnx_model=onnx_model)
    row = next(op for op in result.ops if op.aten == "aten.rand.default")
    assert row.check == "distribution" and row.passed is False
    assert not result.passed


class _Rrelu(torch.nn.Module):
    def __init__(self, training: bool) -> None:
        super().__init__()
        self.drawing = training

    def forward(self, x: torch.Tensor, noise: torch.Tensor):
        out, slopes = torch.ops.aten.rrelu_with_noise_functional(x, noise, 0.1, 0.3, self.drawing)
        return out * 2, slopes


@pytest.mark.parametrize("training", [True, False])
def test_rrelu_draws_only_in_training(training: bool) -> None:
    """Training rrelu is checked by distribution (output and slopes, each with its own law); in
    eval it is deterministic and compared by value."""
    args = (torch.randn(64, 64), torch.zeros(64, 64))
    result = harness.verify(_Rrelu(training), args, strict=True)
    row = next(op for op in result.ops if op.aten == "aten.rrelu_with_noise_functional.default")
    assert row.check == ("distribution" if training else "values") and row.passed, row.to_dict()
    assert result.passed, [c.to_dict() for c in result.outputs]
