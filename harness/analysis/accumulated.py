"""Accumulated error per op: an instrumented run with every mapped value exposed.

The instrumented model is the production model with the values of interest added as graph
outputs. A model whose exposed values would exceed a byte budget runs in consecutive segments
instead (harness.onnxgraph.segments, `SegmentedRun`): each segment is fed the backend's own
values from the segments before it, so the values are still the backend's from the model
inputs, and only one segment's exposed values are held at a time. Exposing a value can stop the backend from fusing across it, so the instrumented
run's final outputs are compared (exactly) with the production run's; any difference is
reported beside the per-op rows, since it means the accumulated errors describe a slightly
different computation than the production one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx

from harness.analysis.strictness import harness_errors
from harness.metrics.arrays import as_array
from harness.metrics.comparison import Comparison, compare
from harness.onnxgraph.segments import Segment, plan_segments, segment_model, tensor_types
from harness.onnxgraph.values import expose_values
from harness.runtime.errors import BACKEND_ERRORS, first_line
from harness.runtime.runner import ModelRunner


@dataclass
class InstrumentedRun:
    """Every exposed value of one run, and how its final outputs compare with production's."""

    values: dict[str, np.ndarray]
    final_vs_production: list[Comparison] = field(default_factory=list)
    error: str = ""  # why the instrumented run failed ("" when it ran)

    def notes(self) -> list[str]:
        """The report lines this run contributes: a failure, or a difference from production."""
        notes = []
        if self.error:
            notes.append(f"the instrumented run failed, so there are no accumulated errors: {self.error}")
        if self.differs_from_production:
            notes.append(self.production_note())
        return notes

    @property
    def differs_from_production(self) -> bool:
        return any(not c.passed for c in self.final_vs_production)

    def production_note(self) -> str:
        """The report line for a difference from production ('' when there is none)."""
        differing = [c for c in self.final_vs_production if not c.passed]
        if not differing:
            return ""
        worst = max(differing, key=lambda c: c.max_abs)
        return (
            f"the instrumented run's final outputs differ from the production run's in "
            f"{len(differing)} output(s) (max abs {worst.max_abs:.3g} in {worst.name!r}): exposing "
            "intermediates changed the backend's fusions, so accumulated errors describe a "
            "slightly different computation; see instrumented_vs_production"
        )


def run_instrumented(
    model: onnx.ModelProto,
    exposed: Sequence[str],
    feeds: Mapping[str, np.ndarray],
    run: ModelRunner,
    production: Sequence[np.ndarray] | None = None,
    strict: bool | None = None,
) -> InstrumentedRun:
    """Run `model` once with `exposed` values as extra outputs; compare its final outputs
    with `production` (the production session's outputs, in graph output order). Only the
    backend's errors are findings; the harness's own are raised in strict mode."""
    instrumented = expose_values(model, exposed)
    try:
        with harness_errors("running the instrumented model", strict, findings=BACKEND_ERRORS) as failed:
            values = run(instrumented, dict(feeds))  # the harness's code around it: session, shared weights
    except BACKEND_ERRORS as error:  # a model the backend cannot run: reported, isolation still runs
        return InstrumentedRun({}, error=first_line(error))
    if failed:
        return InstrumentedRun({}, error=failed.note)
    result = InstrumentedRun(values)
    if production is not None:
        result.final_vs_production = compare_with_production(
            {o.name: values[o.name] for o in model.graph.output}, production
        )
    return result


def compare_with_production(final: Mapping[str, Any], production: Sequence[Any]) -> list[Comparison]:
    """Exact comparison (atol = rtol = 0) of the instrumented run's outputs with production's."""
    return [
        compare(as_array(value), as_array(expected), atol=0.0, rtol=0.0, name=name)
        for (name, value), expected in zip(final.items(), production)
    ]


class SegmentedRun:
    """The instrumented run of `model` in segments of about `budget` bytes of exposed values.

    Iterate `values()` to run the segments in graph order: it yields (segment index, {exposed
    value: array}) after each, holding besides only the values that cross the next cut (each
    released after its last reader). `segment_of` says in which segment a value is produced.
    Afterwards `result` holds the final outputs' comparison with production and any failure;
    a segment the backend cannot run ends the run there (the values yielded so far stand).
    """

    def __init__(self, model: onnx.ModelProto, exposed: Sequence[str], feeds: Mapping[str, np.ndarray],
                 run: ModelRunner, nbytes: Callable[[str], int], budget: int,
                 production: Sequence[np.ndarray] | None = None, strict: bool | None = None) -> None:
        self.model = model
        self.feeds = dict(feeds)
        self.run = run
        self.production = production
        self.strict = strict
        self.types = tensor_types(model)
        self.segments: list[Segment] = plan_segments(model, exposed, nbytes, budget, self.types)
        self.segment_of = {name: index for index, segment in enumerate(self.segments)
                           for node in model.graph.node[segment.start:segment.stop] for name in node.output if name}
        self.result = InstrumentedRun({})

    def values(self) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
        live: dict[str, np.ndarray] = dict(self.feeds)
        outputs = [o.name for o in self.model.graph.output]
        for index, segment in enumerate(self.segments):
            model = segment_model(self.model, segment, live, self.types)
            fed = {name: live[name] for name in segment.inputs}
            try:
                with harness_errors("running a segment of the instrumented model", self.strict,
                                    findings=BACKEND_ERRORS) as failed:  # the harness's code around the run
                    produced = self.run(model, fed)
            except BACKEND_ERRORS as error:  # the backend cannot run this piece of the model
                self.result.error = self._failed(index, first_line(error))
                return
            if failed:
                self.result.error = self._failed(index, failed.note)
                return
            del fed, model
            for name in segment.released:
                live.pop(name, None)
            live.update((name, produced[name]) for name in segment.carried)
            box = [{name: produced[name] for name in segment.exposed}]
            del produced  # handed over whole: once the caller drops them, nothing here holds them
            yield index, box.pop()
        if self.production is not None and all(name in live for name in outputs):
            self.result.final_vs_production = compare_with_production(
                {name: live[name] for name in outputs}, self.production)

    def _failed(self, index: int, reason: str) -> str:
        if len(self.segments) == 1:
            return reason
        return (f"segment {index + 1} of {len(self.segments)} (nodes {self.segments[index].start} to "
                f"{self.segments[index].stop - 1}) failed, so the ops after it have none: {reason}")
