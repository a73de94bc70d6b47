"""What every rendering of a parity document shares: verdict counts, the run's worst ops,
headroom per op kind, and one terminal line per case."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from harness.report.document import CASE_STATUSES, as_float

WORST_OPS = 10


def fmt(value: Any, digits: int = 3) -> str:
    """A number as a reader wants it: 3 significant digits, '-' for missing."""
    number = as_float(value)
    if number is None:
        return "-"
    if math.isinf(number):
        return "inf" if number > 0 else "-inf"
    return f"{number:.{digits}g}"


def verdict_counts(document: Mapping[str, Any]) -> dict[str, int]:
    """{status: number of cases} for every case status, in the schema's order."""
    counts = dict.fromkeys(CASE_STATUSES, 0)
    for case in document.get("cases", []):
        counts[case["status"]] = counts.get(case["status"], 0) + 1
    return counts


def ops_of(case: Mapping[str, Any]) -> list[dict[str, Any]]:
    return (case.get("verification") or {}).get("ops", [])


def measured(op: Mapping[str, Any]) -> tuple[str, dict[str, Any] | None]:
    """("isolated" | "accumulated", the comparison) an op is judged by."""
    if op.get("isolated"):
        return "isolated", op["isolated"]
    return "accumulated", op.get("accumulated")


def ratio(op: Mapping[str, Any]) -> float:
    """The op's error relative to what its verdict allowed (the verdict's score); for a row
    without a verdict, relative to its tolerance (isolated; accumulated when not isolated)."""
    verdict = op.get("verdict") or {}
    score = as_float(verdict.get("score"))
    if score is not None and not math.isnan(score):
        return score
    _, comparison = measured(op)
    value = as_float(comparison.get("tolerance_ratio")) if comparison else None
    return 0.0 if value is None or math.isnan(value) else value


def max_output_error(case: Mapping[str, Any]) -> float | None:
    outputs = (case.get("verification") or {}).get("outputs", [])
    values = [as_float(o.get("max_abs")) for o in outputs]
    return max((v for v in values if v is not None), default=None)


@dataclass(frozen=True)
class RankedOp:
    case: str
    op: dict[str, Any]

    @property
    def ratio(self) -> float:
        return ratio(self.op)


def all_ops(document: Mapping[str, Any]) -> Iterator[RankedOp]:
    for case in document.get("cases", []):
        for op in ops_of(case):
            yield RankedOp(case["name"], op)


def worst_ops(document: Mapping[str, Any], count: int = WORST_OPS) -> list[RankedOp]:
    """The `count` ops of the run with the largest error relative to tolerance, measured ones only
    (isolated errors outrank accumulated ones, which carry every error before them)."""
    ranked = [r for r in all_ops(document) if measured(r.op)[1] is not None and r.ratio > 0]
    ranked.sort(key=lambda r: (r.op.get("isolated") is not None, r.ratio), reverse=True)
    return ranked[:count]


def failing_ops(case: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [op for op in ops_of(case) if op.get("passed") is False]


@dataclass
class OpKind:
    """One ATen overload (and dtype) across the run: its worst observed isolated error against
    its tolerance."""

    aten: str
    dtype: str
    count: int = 0
    failed: int = 0
    observed: float = 0.0  # largest isolated min_atol: the smallest atol every instance passes at
    worst_ratio: float = 0.0
    atol: float | None = None
    rtol: float | None = None
    worst_case: str = ""

    @property
    def headroom(self) -> float:
        return math.inf if self.worst_ratio == 0 else 1.0 / self.worst_ratio


def op_kinds(document: Mapping[str, Any]) -> list[OpKind]:
    """Isolated ops grouped by (ATen overload, dtype), least headroom first."""
    kinds: dict[tuple[str, str], OpKind] = {}
    for ranked in all_ops(document):
        op = ranked.op
        isolated = op.get("isolated")
        if not isolated:
            continue
        kind = kinds.setdefault((op["aten"], op.get("dtype", "*")), OpKind(op["aten"], op.get("dtype", "*")))
        kind.count += 1
        kind.failed += op.get("passed") is False
        observed = as_float(isolated.get("min_atol")) or 0.0
        kind.observed = max(kind.observed, observed)
        if ranked.ratio >= kind.worst_ratio:
            kind.worst_ratio, kind.worst_case = ranked.ratio, ranked.case
            kind.atol, kind.rtol = op["tolerance"].get("atol"), op["tolerance"].get("rtol")
    return sorted(kinds.values(), key=lambda k: (-k.worst_ratio, k.aten))


def op_types(onnx_ops: list[str]) -> str:
    """Distinct ONNX op types in emission order, Constants left out, with counts over one."""
    counts: dict[str, int] = {}
    for op in onnx_ops:
        if op != "Constant":
            counts[op] = counts.get(op, 0) + 1
    return "+".join(f"{op}x{n}" if n > 1 else op for op, n in counts.items()) or "-"


def runtime_layer(fusion: Mapping[str, Any] | None) -> str:
    """A row's runtime layer (`runtime_fusion`) in a few words: its type, name and precision, and
    for a layer that ran several FX nodes, those nodes and its verdict as a region; '' for none."""
    if not fusion:
        return ""
    text = f"{fusion.get('layer_type', '?')} {fusion.get('layer', '?')}, {fusion.get('precision') or '?'}"
    members = list(fusion.get("fx_nodes") or [])
    if len(members) > 1:
        judged = fusion.get("passed")
        verdict = "" if judged is None else (": region passes" if judged else ": region FAILS")
        text += f" ({' + '.join(members)}{verdict})"  # judged on the output's row only
    return text


def op_name(op: Mapping[str, Any]) -> str:
    """The op's FX node; for an optimised region, with every FX node it stands for:
    `batch_norm (region: conv2d + batch_norm)`."""
    members = [m.get("fx_node") for m in op.get("region") or []]
    return f"{op.get('fx_node')} (region: {' + '.join(members)})" if len(members) > 1 else str(op.get("fx_node"))


def op_text(op: Mapping[str, Any]) -> str:
    """`conv2d_3 [Conv] isolated max_abs=1e-05 (0.3x tol) at Scope file.py:12`; with a verdict
    `... float16 truth: e_backend 4e-04 vs e_torch 4e-04 (0.2x allowed) at ...`."""
    kind, comparison = measured(op)
    comparison = comparison or {}
    where = f"{op.get('scope') or '-'} {op.get('source') or ''}".rstrip()
    return (f"{op_name(op)} [{op_types(op.get('onnx_ops', []))}] {kind} max_abs={fmt(comparison.get('max_abs'))} "
            f"({verdict_text(op.get('verdict')) or fmt(comparison.get('tolerance_ratio')) + 'x tol'}) at {where}")


def numeric_findings(record: Mapping[str, Any]) -> list[str]:
    """`first non-finite value at relu_3 (Net/ReLU[act] net.py:12)`, `overflows float16 at
    conv2d_7 (...)`: where a verification's values leave the dtype's range."""
    found = []
    first = record.get("first_nonfinite")
    if first:
        where = " ".join(part for part in (first.get("scope"), first.get("source")) if part)
        found.append(f"first non-finite disagreement at {first['fx_node']}" + (f" ({where})" if where else "")
                     + f", {first.get('elements')} element(s) against {first.get('against')}")
    for flag in record.get("overflows", [])[:3]:
        where = " ".join(part for part in (flag.get("scope"), flag.get("source")) if part)
        found.append(f"overflows {flag['dtype']} at {flag['fx_node']}" + (f" ({where})" if where else "")
                     + f": fp64 truth reaches {fmt(flag.get('truth_max'))}")
    return found


def verdict_text(verdict: Mapping[str, Any] | None) -> str:
    """`float16 truth: e_backend 4e-04 vs e_torch 4e-04, 0.2x allowed`, `float32 override: 0.3x
    tol`: the rule that decided, its dtype and numbers ('' without a verdict)."""
    if not verdict:
        return ""
    head = f"{verdict.get('dtype') or '?'} {verdict.get('rule')}"
    if verdict.get("e_backend") is not None and verdict.get("rule") == "truth":
        return (f"{head}: e_backend {fmt(verdict.get('e_backend'))} vs e_torch {fmt(verdict.get('e_torch'))}, "
                f"{fmt(verdict.get('score'))}x allowed")
    return f"{head}: {fmt(verdict.get('score'))}x tol"


def worst_op(case: Mapping[str, Any]) -> dict[str, Any] | None:
    record = case.get("verification") or {}
    name = record.get("worst_op")
    return next((op for op in record.get("ops", []) if op["fx_node"] == name), None)


def case_line(case: Mapping[str, Any]) -> str:
    """One terminal line per case: verdict, checker, max output error, both sizes, worst op."""
    name, status = case["name"], case["status"]
    seconds = as_float(case.get("seconds"))
    seconds = "-" if seconds is None else f"{seconds:.1f}"
    if status == "crashed":
        crash = case["crash"]
        return f"CRASH {name:<28} {crash['reason']} after {seconds}s"
    if status == "error":
        return f"ERROR {name:<28} {case['error']}"
    record = case["verification"]
    other = case.get("other")
    sizes = case.get("sizes") or ["traced", "other"]
    other_text = "" if other is None else (
        f" {sizes[-1]}={'pass' if other['passed'] else 'FAIL'}({fmt(other.get('max_abs'))})")
    worst = worst_op(case)
    return (
        f"{'PASS' if status == 'pass' else 'FAIL'} {name:<28} "
        f"checker={'ok' if record['checker']['passed'] else 'FAILED'} "
        f"max_out_err={fmt(max_output_error(case))}{other_text} ops={len(record['ops'])} time={seconds}s "
        f"worst_op={op_text(worst) if worst else '-'}"
    )


# --- backends ----------------------------------------------------------------------------------

DEFAULT_BACKEND = "onnxruntime"
"""The backend a record without a `backend` field was verified on (reports before the backend axis)."""
LOWER_PRECISIONS = ("bfloat16", "float16")
FAILS = "fails: "  # the notes naming why a backend's verdict fails where no output does (harness.analysis.rows.FAILS)


@dataclass(frozen=True)
class BackendEntry:
    """One backend's part of a case: the verification's own (the first backend), or one of its
    `backend_results`."""

    backend: str
    passed: bool | None
    skipped: str
    outputs: list[dict[str, Any]]
    output_verdicts: list[Any]
    ops: list[dict[str, Any]]
    worst_op: str | None
    settings: dict[str, Any]
    notes: tuple[str, ...] = ()

    @classmethod
    def of(cls, result: Mapping[str, Any]) -> BackendEntry:
        """A further backend's entry from its BackendResult `to_dict()` (or a report's compact one)."""
        return cls(result["backend"], result.get("passed"), result.get("skipped") or "", result.get("outputs", []),
                   result.get("output_verdicts") or [], result.get("ops", []), result.get("worst_op"),
                   result.get("settings") or {}, tuple(result.get("notes", [])))

    @property
    def runtime_precision(self) -> str:
        """The precision the compiled model reports (OpenVINO), else 'as declared'."""
        return str((self.settings.get("runtime") or {}).get("precision") or "as declared")

    @property
    def max_output_error(self) -> float | None:
        values = [as_float(o.get("max_abs")) for o in self.outputs]
        return max((v for v in values if v is not None), default=None)

    @property
    def worst(self) -> dict[str, Any] | None:
        """The row with the largest score (measured rows only)."""
        ranked = [op for op in self.ops if measured(op)[1] is not None]
        return max(ranked, key=ratio, default=None)

    @property
    def below_declared(self) -> int:
        """Rows the backend ran below their declared precision."""
        return sum(1 for op in self.ops if ran_below_declared(op))

    @property
    def failing(self) -> list[dict[str, Any]]:
        return [op for op in self.ops if op.get("passed") is False]

    @property
    def failures(self) -> list[str]:
        """What fails on this backend, each named: its failing outputs (with the rule that decided),
        then its failing rows (with who is blamed); a failing verdict with neither names the run
        itself (no outputs, or the reason in its notes). [] when nothing fails."""
        named = failing_outputs(self.outputs, self.output_verdicts)
        named += [f"`{op_name(op)}` ({op.get('blame') or 'fail'})" for op in self.failing]
        if self.passed is False and not named:
            said = [note.removeprefix(FAILS) for note in self.notes if note.startswith(FAILS)]
            why = "no outputs" if not self.outputs else "; ".join(said) or "no output or row fails (a defect)"
            named.append(f"the run: {why}")
        return named


def failing_outputs(outputs: list[dict[str, Any]], verdicts: list[Any]) -> list[str]:
    """Each output that fails, named with what decided it and why, e.g. "output `linear` (cap:
    e_backend 2.62e-05 <= 2 x max(...); against torch 1.15x the float32 cap)"; by its verdict
    where every output has one, else by its comparison against torch."""
    if verdicts and len(verdicts) == len(outputs):
        return [f"output `{v.get('output') or o.get('name')}` ({v.get('decided_by') or v.get('rule')}: "
                f"{v.get('reason') or verdict_text(v)})" for o, v in zip(outputs, verdicts) if not v.get("passed")]
    return [f"output `{o.get('name')}` (against torch: {fmt(o.get('tolerance_ratio'))}x tol)"
            for o in outputs if o.get("passed") is False]


def ran_below_declared(op: Mapping[str, Any]) -> bool:
    precision = (op.get("runtime_precision") or {}).get("precision")
    return bool(precision) and precision != op.get("dtype") and precision in LOWER_PRECISIONS


def backend_entries(case: Mapping[str, Any]) -> list[BackendEntry]:
    """Every backend a case was verified on, the verification's own first ([] for a case that
    crashed or errored before a verification)."""
    record = case.get("verification")
    if not record:
        return []
    entries = [BackendEntry(record.get("backend") or DEFAULT_BACKEND, record.get("passed"), "", record.get("outputs", []),
                            record.get("output_verdicts") or [], record.get("ops", []), record.get("worst_op"),
                            record.get("backend_settings") or {},
                            (f"{FAILS}the ONNX checker refused the model",) if (record.get("checker") or {}).get("passed") is False else ())]
    entries += [BackendEntry.of(result) for result in record.get("backend_results", [])]
    return entries


def backend_names(document: Mapping[str, Any]) -> list[str]:
    """The run's backends in order: those the document names, then any a case adds."""
    names = list(document.get("backends") or [])
    for case in document.get("cases", []):
        for entry in backend_entries(case):
            if entry.backend not in names:
                names.append(entry.backend)
    return names or [DEFAULT_BACKEND]


def backend_status(case: Mapping[str, Any], backend: str) -> str:
    """A case's status on one backend: pass, fail, skipped, not-run (not asked for it), or the
    case's own crashed / error."""
    if case["status"] in ("crashed", "error"):
        return case["status"]
    entry = next((e for e in backend_entries(case) if e.backend == backend), None)
    if entry is None:
        return "not-run"
    if entry.skipped:
        return "skipped"
    return "pass" if entry.passed else "fail"


@dataclass(frozen=True)
class OpAcrossBackends:
    """One FX node's rows on every backend of a case, with the backends at fault: a failing row's
    blame (export, runtime, runtime-precision; 'fail' when the row gives none) or a passing row
    the runtime could pass only at a lower precision."""

    fx_node: str
    aten: str
    rows: dict[str, dict[str, Any] | None]
    faults: dict[str, str]

    @property
    def worst_ratio(self) -> float:
        return max((ratio(op) for op in self.rows.values() if op is not None), default=0.0)

    @property
    def export_fault(self) -> bool:
        return "export" in self.faults.values()


def _fault(op: Mapping[str, Any] | None) -> str:
    if op is None:
        return ""
    blame = op.get("blame") or ""
    if op.get("passed") is False:
        return blame or "fail"
    return blame if blame == "runtime-precision" else ""


def ops_across_backends(case: Mapping[str, Any]) -> list[OpAcrossBackends]:
    """Every FX node of a case with its row on each backend that ran (graph order of the first
    backend, then rows only another backend has)."""
    entries = [e for e in backend_entries(case) if not e.skipped]
    order: dict[str, str] = {}
    for entry in entries:
        for op in entry.ops:
            order.setdefault(op["fx_node"], op.get("aten", ""))
    by_backend = {e.backend: {op["fx_node"]: op for op in e.ops} for e in entries}
    found = []
    for fx_node, aten in order.items():
        rows = {backend: rows.get(fx_node) for backend, rows in by_backend.items()}
        faults = {backend: _fault(op) for backend, op in rows.items() if _fault(op)}
        found.append(OpAcrossBackends(fx_node, aten, rows, faults))
    return found


def ops_to_compare(case: Mapping[str, Any], count: int) -> list[OpAcrossBackends]:
    """The ops worth reading side by side: every op some backend is at fault for, then the
    largest scores across backends, up to `count` in all (faults are never cut)."""
    ops = ops_across_backends(case)
    faulty = [op for op in ops if op.faults]
    rest = sorted((op for op in ops if not op.faults), key=lambda op: op.worst_ratio, reverse=True)
    return faulty + rest[:max(0, count - len(faulty))]
