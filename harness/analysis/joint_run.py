"""The instrumented run carried by the isolation batch's run: one load and one run of both
models on the backend (harness.onnxgraph.joint) instead of two.

    joint = JointRun(analysis.run, instrumented_model, feeds)
    isolate(..., run=joint.isolation)            # the first batch run also runs the instrumented model
    run_instrumented(..., run=joint.instrumented)  # its values, taken from that run

A backend that cannot load or run the joint model runs each alone, as without this: its errors
then stay with the model that causes them (the instrumented run's note, the isolation batch's
splitting). The harness's own errors propagate unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import onnx

from harness.onnxgraph.joint import side_by_side
from harness.runtime.errors import BACKEND_ERRORS
from harness.runtime.runner import ModelRunner


class JointRun:
    """Runners for an isolation batch and an instrumented model that share one backend run."""

    def __init__(self, run: ModelRunner, instrumented: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> None:
        self._run = run
        self._pending: tuple[onnx.ModelProto, dict[str, np.ndarray]] | None = (instrumented, dict(feeds))
        self._values: dict[str, np.ndarray] | None = None
        self.joint_runs = 0  # backend runs that computed both models (0 or 1)

    def isolation(self, model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run an isolation batch; the first one also computes the instrumented model."""
        if self._pending is None:
            return self._run(model, feeds)
        instrumented, instrumented_feeds = self._pending
        self._pending = None
        joint = side_by_side(instrumented, instrumented_feeds, model, feeds)
        try:
            values = self._run(joint.model, joint.feeds)
        except BACKEND_ERRORS:  # each alone then, so that the failure is the model's that causes it
            self._pending = (instrumented, instrumented_feeds)
            return self._run(model, feeds)
        self.joint_runs += 1
        self._values, isolated = joint.split(values)
        return isolated

    def instrumented(self, model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The instrumented model's values: from the joint run when it computed exactly this
        model's outputs, else a run of its own."""
        values, self._values = self._values, None
        if values is not None and set(values) == {o.name for o in model.graph.output}:
            return values
        return self._run(model, feeds)
