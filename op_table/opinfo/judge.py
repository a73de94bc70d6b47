"""One sample's outputs judged as the harness judges an op: its tolerance rows and its verdict
against the fp64 truth (harness.metrics.verdict), not a table of the sweep's own.

Each floating output is decided, in order, by
- an explicit (rtol, atol) for the sample (a bounded expectation of tests/opinfo_expectations.py,
  torch_lib's `tolerance={dtype: (rtol, atol)}`): an override row, backend against torch;
- a row of the harness's tolerance table for one of the overloads the sample exercised: an
  override, as it is in a verification;
- the rule against the fp64 truth (the sample called in float64, `harness.analysis.truth.
  model_truth`), capped by the dtype's default row, with the program's reduction length and one
  rounding per ATen op it holds;
- without a truth (no float64 kernel, a truth of another shape): the dtype's default row,
  backend against torch.
The truth is taken as the dtype holds it where it lies beyond the dtype's range: a value whose
fp64 truth overflows float16 is correctly rounded to +-inf, as torch and the backend give it.
Integer and boolean outputs must be equal; dtypes and shapes must be torch's.

Some outputs are not compared by value (`special_outputs`):
- those torch does not define (`undefined_outputs`): a random op's draw is judged by its
  distribution, as the harness judges one (harness.analysis.draws: shape, dtype, support and
  moments against the law its arguments define); a value computed from a draw, or uninitialised
  memory (`torch.empty` and its kin), by shape and dtype alone;
- an op's indices (sort, topk, argmax, ...: harness.metrics.ties), through the values they select
  in torch's input, so that a tie broken another way passes and a wrong index fails (a stable
  sort's indices are compared as they are: its order of ties is defined).
A nearest grid sample is compared by value, after its picks on .5 ties are settled
(`nearest_outputs`, harness.metrics.nearest_ties): where a coordinate lies on a tie and the
backend (or torch) took either neighbour's pixel, it counts as the truth's pick; any other pixel
is judged as it is.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from harness.metrics.arrays import as_array
from harness.metrics.comparison import Comparison, compare
from harness.metrics.noise import dtype_key, load_noise_model, unit_roundoff
from harness.metrics.tolerances import Tolerance, ToleranceTable, is_override, load as load_tolerances
from harness.metrics.verdict import (
    OVERRIDE, TOLERANCE, Verdict, VerdictRule, by_row, by_truth, load_rule, overflow_limit,
)

DEVICE = "cpu"  # the sweep runs onnxruntime's CPU provider (or onnx.reference) against torch on the CPU
EXPECTATION_SOURCE = "a bounded expectation of the sweep (tests/opinfo_expectations.py)"
# ATen overloads that return uninitialised memory: only the shape and dtype are defined
UNINITIALISED = frozenset({"aten.empty.memory_format", "aten.empty.default", "aten.empty_like.default",
                           "aten.empty_permuted.default", "aten.empty_strided.default", "aten.new_empty.default",
                           "aten.new_empty_strided.default"})


@dataclass(frozen=True)
class ProgramFacts:
    """What the verdict needs from a sample's captured program: the longest reduction of its
    ops, the ATen ops that round on the way to an output, and why it has no fp64 truth ('' when
    it has one)."""

    reduction_length: int
    roundings: int
    no_truth: str = ""


def program_facts(program: torch.export.ExportedProgram) -> ProgramFacts:
    """The reduction length (the harness's rule per op, on the recorded shapes), the op count and
    the reason for no truth (a random op) of a captured sample."""
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    from harness.analysis.truth import no_truth_reason, reduction_length

    def recorded(value: Any) -> Any:
        return value.meta.get("val") if isinstance(value, torch.fx.Node) else value

    length, roundings, no_truth = 1, 0, ""
    for node in program.graph.nodes:
        if node.op != "call_function" or node.target is operator.getitem:
            continue
        roundings += 1
        no_truth = no_truth or no_truth_reason(node)
        args = list(torch.fx.node.map_aggregate(node.args, recorded))
        try:
            length = max(length, reduction_length(node, args, node.meta.get("val")))
        except (AttributeError, TypeError, ValueError, GuardOnDataDependentSymNode):
            continue  # a symbolic or data-dependent size (bincount's, nonzero's): the rule's default
    return ProgramFacts(length, max(roundings, 1), no_truth)


@functools.cache
def harness_rules() -> tuple[ToleranceTable, VerdictRule]:
    """The harness's shipped tolerance table and verdict rule."""
    return load_tolerances(), load_rule(load_noise_model())


def sample_truth(module: torch.nn.Module, tensors: Sequence[torch.Tensor], facts: ProgramFacts) -> list[Any] | None:
    """The sample's outputs in float64 (its floating inputs and weights cast up exactly), or None
    when it has none: a random op, or torch refuses float64 for it."""
    from harness.analysis.truth import OpCallFailed, model_truth
    from harness.metrics.arrays import flatten_outputs

    if facts.no_truth:
        return None
    try:
        return flatten_outputs(model_truth(module, tuple(t.clone() for t in tensors)))
    except OpCallFailed:
        return None


def judge_output(got: np.ndarray, want: torch.Tensor, truth: Any, *, targets: Sequence[str], facts: ProgramFacts,
                 tolerance: tuple[float, float] | None = None) -> str:
    """'' when the backend's `got` passes against torch's `want` (and the fp64 `truth`, or None),
    else what differs. `tolerance`: the (rtol, atol) of a bounded expectation, an override."""
    got, want_array, problem = _alike(got, want)
    if problem:
        return problem
    dtype = dtype_key(want.dtype)
    if not unit_roundoff(dtype):
        return "" if np.array_equal(got, want_array) else "values differ (exact dtype)"
    verdict = float_verdict(got, want_array, truth, dtype=dtype, targets=targets, facts=facts, tolerance=tolerance)
    if verdict.passed:
        return ""
    finite = np.isfinite(got) & np.isfinite(want_array)
    worst = float(np.max(np.abs(got.astype(np.float64) - want_array)[finite])) if finite.any() else float("nan")
    return f"values differ: max abs {worst:.3g} against torch; {failure_text(verdict)}"


def _alike(got: np.ndarray, want: torch.Tensor) -> tuple[np.ndarray, np.ndarray, str]:
    """`got` and torch's `want` as arrays of one kind, and '' when their dtypes and shapes agree,
    else what differs."""
    want_array = as_array(want)  # bfloat16 as float32, complex as its (..., 2) real pairs, as the model gives them
    if want.dtype == torch.bfloat16:
        got = as_array(got)  # onnx.reference's bfloat16 arrays; onnxruntime's come back cast to float32
    if got.dtype != want_array.dtype:
        return got, want_array, f"dtype {got.dtype}, torch gives {want.dtype}"
    if tuple(got.shape) != tuple(want_array.shape):
        return got, want_array, f"shape {tuple(got.shape)}, torch gives {tuple(want_array.shape)}"
    return got, want_array, ""


def undefined_outputs(program: torch.export.ExportedProgram, tensors: Sequence[torch.Tensor]) -> dict[int, Any]:
    """Output index -> how an output whose values torch does not define is judged: the law of a
    random op's draw (harness.metrics.distribution), or None (shape and dtype alone: a value
    computed from a draw, a random op without a law, uninitialised memory)."""
    from exporter.capturing.signature import user_outputs
    from harness.analysis.draws import draws_here, law_of_node, random_ancestors

    items = [item for item in user_outputs(program)]
    ancestors = random_ancestors(program)
    found: dict[int, Any] = {}
    values: dict[str, Any] | None = None
    for index, item in enumerate(items):
        if not isinstance(item, torch.fx.Node):
            continue
        if str(item.target) in UNINITIALISED or (item.name in ancestors and not draws_here(item)):
            found[index] = None
        elif item.name in ancestors:
            if values is None:
                from harness.analysis.torch_values import record_values

                values = record_values(program, tuple(t.clone() for t in tensors))
            found[index] = law_of_node(item, values)
    return found


OutputJudge = Callable[[np.ndarray, torch.Tensor], str]


def special_outputs(program: torch.export.ExportedProgram, tensors: Sequence[torch.Tensor]) -> dict[int, OutputJudge]:
    """Output index -> how it is judged, for the outputs not compared by value (module docstring):
    each judge takes the backend's output and torch's and returns '' or what differs."""
    judges: dict[int, OutputJudge] = {index: functools.partial(judge_undefined, law=law)
                                      for index, law in undefined_outputs(program, tensors).items()}
    picks = {index: node for index, node in index_outputs(program).items() if index not in judges}
    if picks:
        from harness.analysis.torch_values import record_values

        values = record_values(program, tuple(t.clone() for t in tensors))
        judges.update({index: functools.partial(judge_selection, node=node, values=values)
                       for index, node in picks.items()})
    return judges


def index_outputs(program: torch.export.ExportedProgram) -> dict[int, torch.fx.Node]:
    """Output index -> the op whose indices it is (harness.metrics.ties), for outputs that are an
    op's indices into an input of the program's; not a stable sort's (its ties have an order)."""
    from exporter.capturing.signature import user_outputs
    from harness.metrics.ties import index_output

    found = {}
    for index, item in enumerate(user_outputs(program)):
        if not isinstance(item, torch.fx.Node):
            continue
        node, position = (item.args[0], int(item.args[1])) if item.target is operator.getitem else (item, 0)
        spec = index_output(str(node.target))
        if (spec is None or position != spec.output or not isinstance(node.args[spec.source], torch.fx.Node)
                or node.kwargs.get("stable")):
            continue
        found[index] = node
    return found


def judge_selection(got: np.ndarray, want: torch.Tensor, *, node: torch.fx.Node, values: Mapping[str, Any]) -> str:
    """'' when the backend's indices (`got`) select the values torch's select, or values tied with
    them, in torch's value of the input `node` indexes (`values`: the program's values by node
    name), else what differs."""
    from harness.metrics import ties

    got, want_array, problem = _alike(got, want)
    if problem:
        return problem
    spec = ties.index_output(str(node.target))
    source = as_array(values[node.args[spec.source].name])
    args = list(node.args)
    axis = None if spec.selection else ties.dim_of(spec, args, source.ndim)
    comparison = ties.compare_selection(got, want_array, source, axis=axis, keeps_dim=ties.keeps_dim(spec, args),
                                        selection=spec.selection)
    return "" if comparison.passed else f"indices differ: {comparison.note}"


TieSettler = Callable[[np.ndarray, torch.Tensor, Any], tuple[np.ndarray, torch.Tensor]]


def nearest_outputs(program: torch.export.ExportedProgram, tensors: Sequence[torch.Tensor]) -> dict[int, TieSettler]:
    """Output index -> how the picks of a nearest grid sample (an output that is a nearest
    aten.grid_sampler_2d) on .5 ties are settled before it is judged: `settle_nearest` with the
    pixels its input and grid (torch's values) allow."""
    from exporter.capturing.signature import user_outputs
    from harness.analysis.nearest_rows import is_nearest_sample, nearest_picks_of

    found = {index: item for index, item in enumerate(user_outputs(program))
             if isinstance(item, torch.fx.Node) and is_nearest_sample(item)}
    if not found:
        return {}
    from harness.analysis.torch_values import record_values

    values = record_values(program, tuple(t.clone() for t in tensors))
    return {index: functools.partial(settle_nearest, picks=nearest_picks_of(node, values))
            for index, node in found.items()}


def settle_nearest(got: np.ndarray, want: torch.Tensor, truth: Any, *, picks: Any) -> tuple[np.ndarray, torch.Tensor]:
    """The backend's `got` and torch's `want` with their picks on .5 ties settled to the fp64
    truth's (to torch's without a truth of the same shape): harness.metrics.nearest_ties.settle."""
    from harness.metrics.nearest_ties import settle

    got_array, want_array = as_array(got), as_array(want)
    truth_array = as_array(truth) if truth is not None and hasattr(truth, "shape") else None
    reference = truth_array if truth_array is not None and truth_array.shape == want_array.shape else want_array
    if not got_array.shape == want_array.shape == reference.shape == picks.candidates.shape[1:]:
        return got, want  # another shape: judged (and refused) as it is
    settled_want = torch.from_numpy(settle(want_array, reference, picks)[0]).to(want.dtype)
    return settle(got_array, reference, picks)[0], settled_want


def judge_undefined(got: np.ndarray, want: torch.Tensor, law: Any) -> str:
    """'' when an output torch defines no values of passes: its dtype and shape are torch's and,
    given a `law` (a draw's), the backend's draw follows it (support and moments), else why not."""
    from harness.metrics.distribution import compare_distribution

    got, want_array, problem = _alike(got, want)
    if problem or law is None:
        return problem
    comparison = compare_distribution(got, want_array, law)
    return "" if comparison.passed else f"not distributed as its law: {comparison.note}"


def representable(truth: np.ndarray, dtype: str) -> np.ndarray:
    """The fp64 `truth` as `dtype` can hold it: elements beyond the dtype's largest finite value
    (those that round to infinity in it) become that infinity, the correctly rounded result."""
    limit = overflow_limit(dtype)
    if limit is None or truth.dtype.kind != "f" or not np.any(np.abs(truth[np.isfinite(truth)]) > limit):
        return truth
    rounded = torch.from_numpy(np.ascontiguousarray(truth)).to(getattr(torch, dtype))
    overflows = torch.isinf(rounded).numpy() & np.isfinite(truth)
    return np.where(overflows, np.copysign(np.inf, truth), truth)


def float_verdict(got: np.ndarray, want: np.ndarray, truth: Any, *, dtype: str, targets: Sequence[str],
                  facts: ProgramFacts, tolerance: tuple[float, float] | None = None) -> Verdict:
    """The verdict on one floating output (see the module docstring for the order of the rows)."""
    table, rule = harness_rules()
    default = table.lookup("*", DEVICE, dtype)
    override = _override(table, targets, dtype, tolerance)
    row = override or default
    against_torch = compare(got, want, atol=row.atol, rtol=row.rtol, check_dtype=False)
    truth_array = representable(as_array(truth), dtype) if truth is not None and hasattr(truth, "shape") else None
    backend_side = torch_side = None
    if truth_array is not None and truth_array.shape == want.shape:
        backend_side = _against_truth(got, truth_array, row)
        torch_side = _against_truth(want, truth_array, row)
    if override is not None:
        return by_row(against_torch, dtype=dtype, row=override, rule=OVERRIDE,
                      reason=f"the row for {override.aten} ({override.source}) overrides the rule",
                      backend=backend_side, torch_side=torch_side)
    if backend_side is None:
        why = facts.no_truth or "no fp64 truth for this output (torch refused float64, or gave another shape)"
        return by_row(against_torch, dtype=dtype, row=default, rule=TOLERANCE,
                      reason=f"{why}; judged by the {dtype} default row")
    return by_truth(backend_side, torch_side, against_torch, dtype=dtype, reduction_length=facts.reduction_length,
                    rule=rule, row=default, roundings=facts.roundings)


def _override(table: ToleranceTable, targets: Sequence[str], dtype: str,
              tolerance: tuple[float, float] | None) -> Tolerance | None:
    if tolerance is not None:
        rtol, atol = tolerance
        return Tolerance(", ".join(targets), DEVICE, atol, rtol, EXPECTATION_SOURCE, dtype)
    rows = [table.lookup(target, DEVICE, dtype) for target in targets]
    return next((row for row in rows if is_override(row)), None)


def _against_truth(value: np.ndarray, truth: np.ndarray, row: Tolerance) -> Comparison:
    return compare(value, truth, atol=row.atol, rtol=row.rtol, check_dtype=False)


def failure_text(verdict: Verdict) -> str:
    """One line on a failed verdict: the rule that decided and its numbers."""
    if verdict.rule == TOLERANCE or verdict.rule == OVERRIDE:
        row = verdict.tolerance
        return (f"{verdict.tolerance_ratio:.3g}x the (rtol {row['rtol']:.3g}, atol {row['atol']:.3g}) row against "
                f"torch ({verdict.rule}: {verdict.reason})")
    return f"{verdict.rule} rule: {verdict.reason}"
