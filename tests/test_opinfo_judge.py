"""op_table.opinfo.judge: an OpInfo sample's outputs judged as the harness judges an op, by its
tolerance rows and its verdict against the fp64 truth, in every dtype; planted faults fail."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from op_table.opinfo.judge import ProgramFacts, float_verdict, judge_output, program_facts

FACTS = ProgramFacts(reduction_length=1, roundings=1)
TARGETS = ("aten.mul.Tensor",)


def _values(dtype: torch.dtype, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A float64 truth and torch's value of it in `dtype` (rounded once)."""
    truth = torch.randn(64, 32, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return truth, truth.to(dtype)


def _backend(value: torch.Tensor) -> np.ndarray:
    """What the sweep gets back from onnxruntime for `value` (bfloat16 outputs cast to float32)."""
    return value.float().numpy() if value.dtype == torch.bfloat16 else value.numpy()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize(("fault", "passes"), [
    ("exact", True),             # the backend rounds as torch does
    ("rounded_apart", True),     # computed a little apart (0.4 of a rounding unit) and rounded: one ulp off on some
    ("five_percent", False),     # 5% off on one element
    ("garbage", False),          # a regression to garbage
])
def test_a_planted_fault_fails_and_rounding_passes(dtype: torch.dtype, fault: str, passes: bool) -> None:
    truth, want = _values(dtype)
    got = want.clone()
    if fault == "rounded_apart":
        unit = torch.finfo(dtype).eps / 2
        got = (truth * (1 + 0.4 * unit * torch.sign(torch.randn(truth.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(3))))).to(dtype)
        assert not torch.equal(got, want)
    elif fault == "five_percent":
        got.view(-1)[5] *= 1.05
    elif fault == "garbage":
        got = torch.randn(got.shape, generator=torch.Generator().manual_seed(9)).to(dtype)
    failure = judge_output(_backend(got), want, truth, targets=TARGETS, facts=FACTS)
    assert (failure == "") == passes, failure
    if not passes:
        assert failure.startswith("values differ: ") and "truth rule" in failure


def test_the_verdict_is_the_rule_against_the_truth_capped_by_the_default_row() -> None:
    truth, want = _values(torch.float16)
    verdict = float_verdict(_backend(want), want.float().numpy(), truth, dtype="float16", targets=TARGETS, facts=FACTS)
    assert verdict.rule == "truth" and verdict.passed
    assert verdict.e_backend == verdict.e_torch and verdict.floor > 0
    assert "16x the float16 row" in verdict.tolerance["source"]


def test_a_bounded_expectation_overrides_the_rule_against_torch() -> None:
    truth, want = _values(torch.float16)
    got = want.clone()
    got.view(-1)[3] += 0.05
    assert judge_output(_backend(got), want, truth, targets=TARGETS, facts=FACTS) != ""
    assert judge_output(_backend(got), want, truth, targets=TARGETS, facts=FACTS, tolerance=(1e-2, 0.06)) == ""
    failure = judge_output(_backend(got), want, truth, targets=TARGETS, facts=FACTS, tolerance=(1e-2, 0.01))
    assert "override" in failure and "bounded expectation" in failure


def test_without_a_truth_the_default_row_decides_and_says_why() -> None:
    _, want = _values(torch.float32)
    facts = ProgramFacts(1, 1, no_truth="random op (nondeterministic_seeded): no deterministic fp64 truth")
    got = want.clone()
    got.view(-1)[0] += 1e-3
    failure = judge_output(_backend(got), want, None, targets=TARGETS, facts=facts)
    assert "tolerance" in failure and "random op" in failure
    assert judge_output(_backend(want), want, None, targets=TARGETS, facts=facts) == ""


@pytest.mark.parametrize(("got", "want", "failure"), [
    (np.array([1, 2, 3]), torch.tensor([1, 2, 3]), ""),
    (np.array([1, 2, 4]), torch.tensor([1, 2, 3]), "values differ (exact dtype)"),
    (np.array([True, False]), torch.tensor([True, True]), "values differ (exact dtype)"),
    (np.array([1, 2, 3], dtype=np.int32), torch.tensor([1, 2, 3]), "dtype int32, torch gives torch.int64"),
    (np.zeros((2, 3), np.float32), torch.zeros(3, 2), "shape (2, 3), torch gives (3, 2)"),
])
def test_exact_dtypes_dtypes_and_shapes(got: np.ndarray, want: torch.Tensor, failure: str) -> None:
    assert judge_output(got, want, None, targets=TARGETS, facts=FACTS) == failure


def test_program_facts_read_the_reduction_length_and_random_ops() -> None:
    class MatMul(torch.nn.Module):
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return torch.relu(a @ b)

    class Noise(torch.nn.Module):
        def forward(self, a: torch.Tensor) -> torch.Tensor:
            return a + torch.rand_like(a)

    facts = program_facts(torch.export.export(MatMul(), (torch.randn(3, 17), torch.randn(17, 4))))
    assert facts.reduction_length == 17 and facts.roundings == 2 and facts.no_truth == ""
    assert "random op" in program_facts(torch.export.export(Noise(), (torch.randn(3),))).no_truth


def test_program_facts_of_a_data_dependent_size_keep_the_other_ops_lengths() -> None:
    class CountThenMatMul(torch.nn.Module):
        def forward(self, x, w, labels):
            return x @ w, torch.bincount(labels)

    program = torch.export.export(CountThenMatMul(), (torch.randn(3, 17), torch.randn(17, 4), torch.tensor([0, 2, 2])))
    facts = program_facts(program)
    assert facts.reduction_length == 17  # bincount's output size is unbacked; the matmul still counts
    assert facts.no_truth == ""
