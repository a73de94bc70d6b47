"""Verify one ONNX model at many sizes: `run_sweep`.

The traced size is the verification already made (per op when asked). Every other size of the
selection (harness.shapes.selection) runs the SAME ONNX model on the example inputs resized
(harness.shapes.resize, or the caller's `make_inputs`) in ONE onnxruntime session, created once
and reused, and its outputs are judged against the module run eagerly at that size, by the
traced verification's rules (the case's tolerances, else the fp64 truth). A size torch itself
cannot run is 'invalid' (the range promised too much), never a failure of the export.

At the first failing size (in selection order), the per-op analysis runs again
(verification.verify_exported), and the first op in graph order that fails there is named: the
op whose output diverges from torch's, or that the backend cannot run, at that size.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from typing import Any

import torch
import torch.fx
import torch.utils._pytree as pytree

from harness import runtime
from harness.analysis.torch_values import flat_user_inputs
from harness.metrics.arrays import as_array, flatten_outputs
from harness.metrics.detections import detection_layout
from harness.verification.options import VerifyOptions
from harness.records import Verification
from harness.shapes.axes import AxisRanges, SweepAxes, read_axes
from harness.shapes.frozen import bound_inputs, frozen_at
from harness.shapes.resize import resized_leaves
from harness.shapes.selection import SizePoint, explicit_sizes, select_sizes

logger = logging.getLogger(__name__)

PASS, FAIL, INVALID, STATIC = "pass", "fail", "invalid", "static"
MAX_FAILING_OPS = 10  # failing rows a sweep record keeps at its first failing size

Shapes = int | Sequence[Mapping[str, int]]


@dataclass
class SizeResult:
    """One size of a sweep on one backend and its verdict: "pass", "fail", "invalid" (torch
    itself could not run the module at this size) or "static" (the outputs differ where the
    export recorded a size it froze, and these inputs change it: exported static, named in
    `error` with its expression and line, not a failure); `error`: the backend's or torch's
    error, or what was frozen."""

    point: SizePoint
    status: str
    max_abs: float | None = None
    worst_ratio: float | None = None  # largest output error relative to what its verdict allowed
    failing_outputs: list[str] = field(default_factory=list)
    error: str = ""
    seconds: float = 0.0
    backend: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {**self.point.to_dict(), "label": self.point.label(), "status": self.status,
                "max_abs": self.max_abs, "worst_ratio": self.worst_ratio, "backend": self.backend,
                "failing_outputs": list(self.failing_outputs), "error": self.error, "seconds": self.seconds}


@dataclass
class ShapeSweep:
    """A sweep's sizes with their verdicts, and the first failing size's per-op diagnosis.

    `sizes`: the first backend's verdicts; `other_backends`: {backend: its verdicts at the same
    points} for every further backend asked for (`skipped_backends`: {backend: why not}).
    `first_failing_op`: the first op (graph order) that fails at the first failing size, as
    {fx_node, aten, onnx_nodes, onnx_ops, scope, source, failure}; None when every size passes
    or no single op fails there (`diagnosis` says which). `at_failure`: that size's Verification.
    """

    axes: SweepAxes
    sizes: list[SizeResult]
    first_failing_op: dict[str, Any] | None = None
    diagnosis: str = ""
    at_failure: Verification | None = field(default=None, repr=False)
    timings: dict[str, float] = field(default_factory=dict)
    other_backends: dict[str, list[SizeResult]] = field(default_factory=dict)
    skipped_backends: dict[str, str] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return all(size.status != FAIL for size in self.all_sizes())

    def all_sizes(self) -> list[SizeResult]:
        """Every backend's verdicts: the first backend's, then each further one's."""
        return [*self.sizes, *(size for sizes in self.other_backends.values() for size in sizes)]

    @property
    def first_failing(self) -> SizeResult | None:
        """The first failing size of the first backend that fails one."""
        return next((size for size in self.all_sizes() if size.status == FAIL), None)

    @property
    def static_sizes(self) -> list[SizeResult]:
        """The sizes reported exported static (on any backend)."""
        return [size for size in self.all_sizes() if size.status == STATIC]

    def to_dict(self) -> dict[str, Any]:
        failing = self.first_failing
        rows = [] if self.at_failure is None else [op.to_dict() for op in self.at_failure.ops if op.passed is False]
        return {
            **self.axes.to_dict(), "passed": self.passed,
            "sizes": [size.to_dict() for size in self.sizes],
            "other_backends": {name: [size.to_dict() for size in sizes] for name, sizes in self.other_backends.items()},
            "skipped_backends": dict(self.skipped_backends),
            "first_failing": None if failing is None else {
                "label": failing.point.label(), "sizes": dict(failing.point.sizes), "op": self.first_failing_op,
                "backend": failing.backend,
                "diagnosis": self.diagnosis,
                "failing_ops": [{k: row[k] for k in ("fx_node", "aten", "onnx_nodes", "onnx_ops", "scope", "source")}
                                for row in rows[:MAX_FAILING_OPS]],
            },
            "timings": dict(self.timings),
        }


@dataclass(frozen=True)
class SweepSettings(VerifyOptions):
    """How the sizes are judged: the traced verification's options, carried to every size."""

    model_name: str = "model"
    locate: bool = True  # run the per-op analysis at the first failing size
    backends: tuple[Any, ...] = ()  # the backends verified (specs or Backends; empty: onnxruntime)


def run_sweep(exported: Any, module: torch.nn.Module, args: tuple[Any, ...], traced: Verification, shapes: Shapes, *,
              kwargs: Mapping[str, Any] | None = None, dynamic_axes: Mapping[str, Mapping[int, str]] | None = None,
              axis_ranges: AxisRanges | None = None, settings: SweepSettings | None = None,
              make_inputs: Callable[[Mapping[str, int], SweepAxes], tuple[Any, ...]] | None = None,
              verify: Callable[..., Verification] | None = None) -> ShapeSweep:
    """Verify `exported` (harness.exporters.ExportedForVerification) at the sizes `shapes` asks
    for: a count N (the traced size and N - 1 more, harness.shapes.selection's order) or a list
    of {axis name: size} points (the traced size first, then these), on every backend of
    `settings.backends` (torch runs once per size; each backend keeps one session for every
    size). `traced` is the verification at the example inputs `args`/`kwargs` (its further
    backends' results give their traced verdicts); `dynamic_axes` names the declared axes,
    `axis_ranges` bounds them ({axis name: (lowest, highest)}). `make_inputs(sizes, axes)`
    returns the args at a point (default: the example's tensors cut or tiled). `verify`
    (harness.verification.verify_with_options, given by the caller so that this layer does not
    import the orchestration above it) reruns the per-op rows at the first failing size to name
    its first failing op; without it the failing size is reported but not located."""
    from harness.analysis.backend_runs import resolve_backends
    from harness.verification.outputs import tolerance_table

    settings = replace(settings or SweepSettings(), tolerances=tolerance_table((settings or SweepSettings()).tolerances))
    started = time.perf_counter()
    chosen = resolve_backends(list(settings.backends) or None, settings.device)
    leaves = (flat_user_inputs(exported.program, args, kwargs) if exported.program is not None
              else pytree.tree_leaves((tuple(args), dict(kwargs or {}))))
    tensors = [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]
    input_names = runtime.real_inputs(exported.model)
    axes = read_axes(exported.program, exported.model, tensors, input_names=input_names, declared=dynamic_axes,
                     ranges=axis_ranges)
    points = (select_sizes(axes.axes, shapes) if isinstance(shapes, int)
              else explicit_sizes(axes.axes, shapes))
    first = str(chosen[0].spec)
    sweep = ShapeSweep(axes, [SizeResult(points[0], PASS if traced.passed else FAIL, *_summary(traced),
                                         error="" if traced.passed else _why(traced), backend=first)])
    traced_elsewhere = {result.backend: result for result in traced.backend_results}
    for backend in chosen[1:]:
        result = traced_elsewhere.get(str(backend.spec))
        if result is not None and result.skipped:
            sweep.skipped_backends[str(backend.spec)] = result.skipped
        elif result is not None:
            sweep.other_backends[str(backend.spec)] = [SizeResult(
                points[0], PASS if result.passed else FAIL, backend=str(backend.spec),
                error="" if result.passed else "; ".join(result.notes[:1]))]
    sessions = [_Session(exported, settings, backend) for backend in chosen
                if str(backend.spec) not in sweep.skipped_backends]
    with ExitStack() as stack:
        for session in sessions:
            stack.enter_context(session)
            if session.unavailable:
                sweep.skipped_backends[session.name] = session.unavailable
        sessions = [session for session in sessions if not session.unavailable]
        for number, point in enumerate(points):
            judged = [session for session in sessions if number > 0 or (
                session.name != first and session.name not in sweep.other_backends)]
            if not judged:
                continue
            point_args, point_kwargs = inputs_at(point, axes, args, kwargs, tensors, make_inputs)
            for result in _judge_size(point, exported, module, point_args, point_kwargs, judged, settings):
                if result.backend == first:
                    sweep.sizes.append(result)
                else:
                    sweep.other_backends.setdefault(result.backend, []).append(result)
    sweep.timings["sizes_s"] = time.perf_counter() - started
    failing = sweep.first_failing
    if failing is not None and settings.locate and verify is not None:
        _locate(sweep, failing, exported, module, args, kwargs, tensors, axes, make_inputs, settings, verify)
    return sweep


def _summary(verification: Verification) -> tuple[float | None, float | None, list[str]]:
    outputs = verification.outputs
    ratios = [v.score for v in verification.output_verdicts if getattr(v, "score", None) is not None]
    ratios = ratios or [c.tolerance_ratio for c in outputs]
    failing = ([c.name for c, v in zip(outputs, verification.output_verdicts) if not v.passed]
               if len(verification.output_verdicts) == len(outputs) else [c.name for c in outputs if not c.passed])
    return (max((c.max_abs for c in outputs), default=None), max(ratios, default=None), failing)


def _why(verification: Verification) -> str:
    if not verification.checker.passed:
        return f"checker: {verification.checker.message}"[:300]
    if not verification.outputs:
        return next((n for n in verification.notes if "backend" in n), "the backend produced no output")[:300]
    return ""


def inputs_at(point: SizePoint, axes: SweepAxes, args: tuple[Any, ...], kwargs: Mapping[str, Any] | None,
              tensors: list[torch.Tensor], make_inputs: Any = None) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """(args, kwargs) at `point`: `make_inputs(sizes, axes)`, or the example's `tensors` (its
    flattened tensor leaves) cut or tiled to the point's shapes in the example's structure."""
    if make_inputs is not None:
        return tuple(make_inputs(point.sizes, axes)), dict(kwargs or {})
    shapes = iter([axes.shape_at(index, point.sizes) for index in range(len(axes.shapes))])
    flat, spec = pytree.tree_flatten((tuple(args), dict(kwargs or {})))
    new_tensors = iter(resized_leaves(tensors, [next(shapes, None) for _ in tensors]))
    flat = [next(new_tensors) if isinstance(leaf, torch.Tensor) else leaf for leaf in flat]
    new_args, new_kwargs = pytree.tree_unflatten(flat, spec)
    return tuple(new_args), dict(new_kwargs)


class _Session:
    """One backend's session for every size of the sweep (released at the end); `unavailable`
    says why the backend cannot run here, `refused` why it would not load the model."""

    def __init__(self, exported: Any, settings: SweepSettings, backend: Any) -> None:
        self.exported, self.settings, self.backend = exported, settings, backend
        self.name = str(backend.spec)
        self.rep: Any = None
        self.refused = ""
        self.unavailable = ""

    def __enter__(self) -> _Session:
        spec = runtime.DeviceSpec.parse(self.settings.device)
        self.unavailable = self.backend.unavailable_reason(spec.backend_device) or ""
        if self.unavailable:
            return self
        shared = runtime.SharedWeights.of(self.exported.model, self.exported.weights)
        options = {} if spec.kind == "reference" else runtime.harness_session_options(
            runtime.OrtConfig.of(self.settings.session_options))
        try:
            self.rep = self.backend.prepare(shared.stubbed(self.exported.model), spec.backend_device,
                                            tf32=self.settings.tf32, shared_weights=shared, **options)
        except runtime.ModelLoadError as error:
            self.refused = f"the backend refused the model: {runtime.first_line(error)}"
        except runtime.BackendUnavailableError as error:
            self.unavailable = runtime.first_line(error)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.rep = None

    def run(self, feeds: dict[str, Any]) -> tuple[list[Any] | None, str]:
        if self.rep is None:
            return None, self.refused
        from harness.runtime.ortvalues import widened

        try:
            return [widened(output) for output in self.rep.run(feeds)], ""
        except runtime.BackendRunError as error:
            return None, f"the backend failed to run the model: {runtime.first_line(error)}"


def _judge_size(point: SizePoint, exported: Any, module: torch.nn.Module, args: tuple[Any, ...],
                kwargs: dict[str, Any], sessions: Sequence[_Session], settings: SweepSettings) -> list[SizeResult]:
    """The size on every session's backend: torch runs once (under inference_mode), each backend
    once, each judged alone. A failing size whose inputs change what the export froze is STATIC."""
    from harness.verification.outputs import run_eager

    started = time.perf_counter()
    spec = runtime.DeviceSpec.parse(settings.device)
    torch_args, torch_kwargs = pytree.tree_map_only(torch.Tensor, lambda t: t.to(spec.torch_device), (args, kwargs))
    try:
        with torch.inference_mode():
            eager = run_eager(module, torch_args, torch_kwargs, spec.torch_device)
    except Exception as error:  # the module itself refuses the size: the range promised too much
        why = (f"torch could not run the module: {type(error).__name__}: "
               f"{str(error).splitlines()[0] if str(error) else ''}")[:300]
        return [SizeResult(point, INVALID, error=why, seconds=time.perf_counter() - started, backend=session.name)
                for session in sessions]
    torch_s = time.perf_counter() - started
    expected = flatten_outputs(eager)
    leaves = (flat_user_inputs(exported.program, args, kwargs) if exported.program is not None
              else pytree.tree_leaves((tuple(args), kwargs)))
    feeds = dict(zip(runtime.real_inputs(exported.model),
                     [as_array(leaf) for leaf in leaves if isinstance(leaf, torch.Tensor)]))
    truths: list[Any] = []  # the fp64 outputs, computed once when a backend's verdict needs them

    def truth() -> list[Any] | None:
        if not truths:
            truths.append(_truth(module, torch_args, torch_kwargs))
        return truths[0]

    results = []
    for session in sessions:
        began = time.perf_counter()
        result = _judge_backend(point, exported, module, session, feeds, eager, expected, settings, truth)
        if result.status == FAIL:
            frozen = frozen_at(exported.model, feeds, bound_inputs(module, args, kwargs))
            if frozen:
                result.status, result.error = STATIC, "; ".join(frozen)[:600]
        result.seconds = torch_s + time.perf_counter() - began
        results.append(result)
    return results


def _judge_backend(point: SizePoint, exported: Any, module: torch.nn.Module, session: _Session,
                   feeds: dict[str, Any], eager: Any, expected: list[Any], settings: SweepSettings,
                   truth: Callable[[], list[Any] | None]) -> SizeResult:
    from harness.verification.outputs import judge_detections, judge_outputs

    spec = runtime.DeviceSpec.parse(settings.device)
    actual, error = session.run(feeds)
    if actual is None:
        return SizeResult(point, FAIL, error=error, backend=session.name)
    record = Verification(settings.model_name, exported.exporter, settings.device, False, traced_checker(), [])
    names = [o.name for o in exported.model.graph.output]
    layout = detection_layout(eager)
    given = settings.output_atol is not None or settings.output_rtol is not None
    if layout is not None and len(actual) == len(expected):
        judge_detections(record, actual, expected, layout, names, table=settings.tolerances, device=spec.kind,
                         atol=settings.output_atol, rtol=settings.output_rtol, truth=None, detector=module)
    else:
        judge_outputs(record, actual, expected, None if given else truth(), names, table=settings.tolerances,
                      device=spec.kind, atol=settings.output_atol, rtol=settings.output_rtol,
                      allowed_mismatch=settings.allowed_mismatch, rounding_steps=_rounding_steps(exported))
    passed = record.verdict(backend_ran=True, output_counts_match=len(actual) == len(expected))
    max_abs, ratio, failing = _summary(record)
    note = "" if len(actual) == len(expected) else f"the ONNX model has {len(actual)} outputs, torch {len(expected)}"
    if not passed and not note:
        note = "; ".join(c.note for c in record.outputs if not c.passed and c.note)[:300]
    return SizeResult(point, PASS if passed else FAIL, max_abs, ratio, failing, note, backend=session.name)


def traced_checker() -> Any:
    """The checker's record for a size: the checker ran once, on the model, at the trace."""
    from harness.records import CheckerResult

    return CheckerResult(True, "checked once for the sweep (the same model at every size)")


def _truth(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any] | None:
    from harness.analysis.truth import OpCallFailed, model_truth

    try:
        return flatten_outputs(model_truth(module, args, kwargs))
    except OpCallFailed:
        return None


def _rounding_steps(exported: Any) -> int:
    """The ops that round a floating result on the way to the outputs (verification's count,
    read from the program's recorded dtypes instead of its values)."""
    if exported.program is None:
        return len(exported.model.graph.node)
    return sum(1 for node in exported.program.graph.nodes if node.op == "call_function"
               and isinstance(node.meta.get("val"), torch.Tensor) and node.meta["val"].is_floating_point())


def _locate(sweep: ShapeSweep, failing: SizeResult, exported: Any, module: torch.nn.Module, args: tuple[Any, ...],
            kwargs: Mapping[str, Any] | None, tensors: list[torch.Tensor], axes: SweepAxes, make_inputs: Any,
            settings: SweepSettings, verify_with_options: Callable[..., Verification]) -> None:
    """Per-op rows at the first failing size; the first failing op in graph order is named."""

    started = time.perf_counter()
    point_args, point_kwargs = inputs_at(failing.point, axes, args, kwargs, tensors, make_inputs)
    if exported.program is not None:
        broken = program_failure(exported.program, point_args, point_kwargs)
        if broken is not None:  # torch's own values cannot be had from the capture at this size
            node, error = broken
            sweep.first_failing_op = {**_node_info(node, exported.model), "failure": "captured program fails"}
            sweep.diagnosis = (f"at {failing.point.label()} the captured program itself fails at {node.name} "
                               f"({node.target}): {error}; the capture fixed a size there")[:500]
            sweep.timings["locate_s"] = time.perf_counter() - started
            return
    try:
        backends = (failing.backend,) if failing.backend else settings.backends
        at_failure = verify_with_options(exported, point_args, point_kwargs, module,
                                         replace(settings, per_op=True, backends=backends))
    except Exception as error:  # the per-op analysis could not run at this size: say so, keep the verdicts
        if settings.strict:
            raise
        sweep.diagnosis = f"the per-op analysis failed at {failing.point.label()}: {type(error).__name__}: {error}"[:400]
        return
    finally:
        sweep.timings["locate_s"] = time.perf_counter() - started
    sweep.at_failure = at_failure
    op = first_failing_op(at_failure)
    if op is not None:
        sweep.first_failing_op = {"fx_node": op.fx_node, "aten": op.aten, "onnx_nodes": list(op.onnx_nodes),
                                  "onnx_ops": list(op.onnx_ops), "scope": op.scope, "source": op.source,
                                  "failure": op.failure}
        sweep.diagnosis = (f"first failing op at {failing.point.label()}: {op.fx_node} ({op.aten}; ONNX "
                           f"{', '.join(op.onnx_ops) or 'no node'}) fails ({op.failure})")
    elif at_failure.passed:
        sweep.diagnosis = (f"at {failing.point.label()} the ONNX model agrees with the captured program, which "
                           "differs from the module run eagerly: the capture fixed something at the traced size")
    else:
        sweep.diagnosis = f"at {failing.point.label()} no single op fails; the outputs diverge (see the rows)"


def first_failing_op(verification: Verification) -> Any:
    """The first op in graph order whose row fails (isolated, or a subgraph the backend cannot
    run); else the first whose accumulated value is outside its tolerance; None when neither."""
    failed = next((op for op in verification.ops if op.passed is False), None)
    if failed is not None:
        return failed
    return next((op for op in verification.ops if op.accumulated is not None and not op.accumulated.passed), None)


class _Stepper(torch.fx.Interpreter):
    """An interpreter that remembers the node it is running."""

    current: Any = None

    def run_node(self, node: torch.fx.Node) -> Any:
        self.current = node
        return super().run_node(node)


def program_failure(program: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any] | None) -> tuple[Any, str] | None:
    """(the FX node, the error's first line) where the captured program fails on these inputs;
    None when it runs (its guards are not checked: only its ops)."""
    from harness.analysis.torch_values import program_inputs

    stepper = _Stepper(program.graph_module)
    try:
        with torch.no_grad():
            stepper.run(*program_inputs(program, args, kwargs))
    except Exception as error:  # any op's own refusal: where the capture stops holding
        return stepper.current, f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"[:300]
    return None


def _node_info(node: Any, model: Any) -> dict[str, Any]:
    """A row-like description of an FX node: its ONNX nodes, scope and source by their provenance."""
    from exporter.contract.keys import FX_NODE_KEY, SCOPE_KEY, SOURCE_KEY

    onnx_nodes = [n for n in model.graph.node
                  if any(p.key == FX_NODE_KEY and p.value == node.name for p in n.metadata_props)]
    meta = {p.key: p.value for p in onnx_nodes[0].metadata_props} if onnx_nodes else {}
    return {"fx_node": node.name, "aten": str(node.target), "onnx_nodes": [n.name for n in onnx_nodes],
            "onnx_ops": [n.op_type for n in onnx_nodes], "scope": meta.get(SCOPE_KEY, ""),
            "source": meta.get(SOURCE_KEY, "")}
