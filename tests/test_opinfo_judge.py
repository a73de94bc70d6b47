"""op_table.opinfo.judge: an OpInfo sample's outputs judged as the harness judges an op, by its
tolerance rows and its verdict against the fp64 truth, in every dtype; planted faults fail."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from op_table.opinfo.judge import (
    ProgramFacts, float_verdict, index_outputs, judge_output, judge_undefined, program_facts, representable,
    special_outputs, undefined_outputs,
)
from op_table.opinfo.record import recorded_max_samples

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


INF = float("inf")


@pytest.mark.parametrize(("truth", "dtype", "held"), [
    ([1.0, 7e4, -7e4], "float16", [1.0, INF, -INF]),          # beyond 65504 rounds to +-inf
    ([65519.0, 65520.0], "float16", [65519.0, INF]),          # 65520 is where float16 rounds to inf
    ([7e4, 1e38], "float32", [7e4, 1e38]),                    # within float32's range: unchanged
    ([3.5e38], "bfloat16", [INF]),
    ([1.0, float("nan"), INF], "float16", [1.0, float("nan"), INF]),
])
def test_the_truth_is_held_as_the_dtype_holds_it(truth: list, dtype: str, held: list) -> None:
    np.testing.assert_array_equal(representable(np.array(truth), dtype), np.array(held))


@pytest.mark.parametrize(("backend", "passes"), [
    ("torch", True),          # inf where the truth overflows float16, as torch gives it
    ("largest", False),       # 65504 there instead: not the correctly rounded value
    ("garbage", False),
])
def test_a_truth_beyond_float16_is_infinity(backend: str, passes: bool) -> None:
    base = torch.rand(32, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 8 + 1
    truth = base ** 6  # up to 9**6 = 531441, beyond float16's 65504
    want = truth.to(torch.float16)
    assert torch.isinf(want).any() and not torch.isinf(want).all()
    got = want.clone()
    if backend == "largest":
        got[torch.isinf(got)] = 65504.0
    elif backend == "garbage":
        got = (torch.rand(32, generator=torch.Generator().manual_seed(2), dtype=torch.float64) * 6e4).to(torch.float16)
    failure = judge_output(_backend(got), want, truth.numpy(), targets=("aten.pow.Tensor_Scalar",), facts=FACTS)
    assert (failure == "") == passes, failure


class _Bernoulli(torch.nn.Module):
    def forward(self, p: torch.Tensor) -> torch.Tensor:
        return torch.bernoulli(p)


class _Noisy(torch.nn.Module):
    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return a + torch.rand_like(a)


class _Empty(torch.nn.Module):
    def forward(self, a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.empty(a.shape[0], 3), a * 2


def test_undefined_outputs_are_draws_values_from_draws_and_uninitialised_memory() -> None:
    p = torch.full((64,), 0.25)
    (law,) = undefined_outputs(torch.export.export(_Bernoulli(), (p,)), (p,)).values()
    assert law.name == "bernoulli" and law.high == 1
    a = torch.randn(4)
    assert undefined_outputs(torch.export.export(_Noisy(), (a,)), (a,)) == {0: None}
    assert undefined_outputs(torch.export.export(_Empty(), (a,)), (a,)) == {0: None}  # output 1 is defined


@pytest.mark.parametrize(("got", "failure"), [
    (np.array([0.0, 1.0] * 32, np.float32), ""),                                  # draws in {0, 1}, mean 0.5
    (np.array([0.0, 2.0] * 32, np.float32), "not distributed as its law"),        # a 2: outside the support
    (np.full(64, 0.5, np.float32), "not distributed as its law"),                 # garbage, however close to p
    (np.zeros(64, np.float32), "not distributed as its law"),                     # all 0 at p = 0.5: the mean is off
    (np.zeros(63, np.float32), "shape (63,), torch gives (64,)"),
    (np.zeros(64, np.float64), "dtype float64, torch gives torch.float32"),
])
def test_a_draw_is_judged_by_its_law_not_by_value(got: np.ndarray, failure: str) -> None:
    p = torch.full((64,), 0.5)
    program = torch.export.export(_Bernoulli(), (p,))
    (law,) = undefined_outputs(program, (p,)).values()
    result = judge_undefined(got, torch.bernoulli(p), law)
    assert result.startswith(failure) if failure else result == "", result


def test_uninitialised_memory_is_judged_by_shape_and_dtype_alone() -> None:
    want = torch.empty(2, 3)
    assert judge_undefined(np.full((2, 3), 1e30, np.float32), want, None) == ""
    assert judge_undefined(np.zeros((3, 2), np.float32), want, None) == "shape (3, 2), torch gives (2, 3)"
    assert judge_undefined(np.zeros((2, 3), np.int64), want, None) == "dtype int64, torch gives torch.float32"


@pytest.mark.parametrize(("key", "recorded", "limits", "limit"), [
    ("flatten", [0, 1, 2, 5], {}, 6),                                           # one past the last index
    ("nn.functional.conv2d@aten.convolution.default", [0, 2, 4, 26], {}, 4),   # a kernel form: its rows
    ("nn.functional.conv2d@aten.convolution.default", [0, 2], {"nn.functional.conv2d@aten.convolution.default": 12}, 12),
    ("flatten", [], {}, 12),                                                    # none recorded: the default
])
def test_the_recorded_limit_of_an_entry_and_of_a_kernel_form(key: str, recorded: list, limits: dict, limit: int) -> None:
    results = {"entries": {key: {"float32": [[i, [], True, ""] for i in recorded]}}, "max_samples": 12,
               "max_samples_of": limits}
    assert recorded_max_samples(results, key, "float32") == limit


class _Sort(torch.nn.Module):
    def __init__(self, stable: bool = False) -> None:
        super().__init__()
        self.stable = stable

    def forward(self, a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.sort(a, stable=True) if self.stable else torch.sort(a)


TIED = torch.tensor([3.0, 1.0, 3.0, 2.0], dtype=torch.float16)  # torch's indices: [1, 3, 0, 2] (or [1, 3, 2, 0])


@pytest.mark.parametrize(("indices", "failure"), [
    ([1, 3, 0, 2], ""),
    ([1, 3, 2, 0], ""),                           # the tie of the two 3s broken the other way
    ([1, 0, 3, 2], "indices differ"),             # a wrong index: selects 3 where torch selects 2
    ([1, 3, 0], "shape (3,), torch gives (4,)"),
])
def test_indices_are_judged_through_the_values_they_select(indices: list, failure: str) -> None:
    program = torch.export.export(_Sort(), (TIED,))
    judges = special_outputs(program, (TIED,))
    assert set(judges) == {1}  # the values (output 0) are compared by value
    result = judges[1](np.array(indices), torch.tensor([1, 3, 0, 2]))
    assert result.startswith(failure) if failure else result == "", result


def test_a_stable_sort_keeps_its_order_of_ties() -> None:
    assert index_outputs(torch.export.export(_Sort(stable=True), (TIED,))) == {}


@pytest.mark.parametrize(("entries", "recorded"), [(["logical_not"], {"logical_not"}), (["logical_n?t", "sort"], {"logical_not"}),
                                                   (["sort"], set())])
def test_a_sweep_runs_only_the_results_keys_it_is_given(tmp_path, entries: list, recorded: set) -> None:
    from op_table.opinfo.record import sweep

    results = sweep(tmp_path / "opinfo.json", ["aten.logical_not.default"], max_samples=1, dtypes=[torch.float32],
                    entries=entries)
    assert set(results["entries"]) == recorded
    assert all(len(rows) == 1 for key in recorded for rows in results["entries"][key].values())


def test_a_recorded_message_names_the_repositorys_files_by_their_path_inside_it():
    from pathlib import Path

    from op_table.opinfo.run import recorded_message

    root = Path(__file__).resolve().parents[1]
    error = ValueError(f"not exported\n  symbolic: {root}/exporter/translate/symbolics/attention.py:40")
    assert recorded_message(error) == "not exported symbolic: exporter/translate/symbolics/attention.py:40"
    assert len(recorded_message(ValueError("x" * 500))) == 300
