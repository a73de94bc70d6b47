"""Accumulated error per op: ONE instrumented run with every mapped value exposed.

The instrumented model is the production model with the values of interest added as graph
outputs. Exposing a value can stop the backend from fusing across it, so the instrumented
run's final outputs are compared (exactly) with the production run's; any difference is
reported beside the per-op rows, since it means the accumulated errors describe a slightly
different computation than the production one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx

from harness.analysis.strictness import harness_error
from harness.metrics.arrays import as_array
from harness.metrics.comparison import Comparison, compare
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
        values = run(instrumented, dict(feeds))
    except BACKEND_ERRORS as error:  # a model the backend cannot run: reported, isolation still runs
        return InstrumentedRun({}, error=first_line(error))
    except Exception as error:  # the harness's own code around the run (session, shared weights)
        return InstrumentedRun({}, error=harness_error(error, "running the instrumented model", strict))
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
