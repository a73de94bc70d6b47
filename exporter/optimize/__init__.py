"""The optimisation stage after translation: passes over onnx_ir that keep per-op provenance.

`optimize(skeleton, weights)` runs `PASSES` in order (constant folding, BatchNorm folded into
Conv/ConvTranspose/Gemm, fused HardSwish/HardSigmoid, no-op removal, static shape sub-graphs,
deduplicated constants) and returns the optimised skeleton and weights with what each pass
changed. A node that a rewrite made stands for every FX node it replaced
(`roundtrip.region`, exporter.optimize.regions); an FX value folded into an initializer is
recorded in the model's `roundtrip.folded_values`.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import onnx
import onnx_ir as ir

from exporter.optimize.bridge import from_ir, to_ir
from exporter.optimize.passes import PASSES, WEIGHT_FOLDING, Pass
from exporter.provenance import FOLDED_VALUES_KEY, FX_NODE_KEY

__all__ = ["FOLDED_VALUES_KEY", "PASSES", "WEIGHT_FOLDING", "Optimized", "Pass", "optimize", "optimize_ir"]

logger = logging.getLogger(__name__)


@dataclass
class Optimized:
    """An optimised model (skeleton and weights) and what each pass changed."""

    skeleton: onnx.ModelProto
    weights: dict[str, np.ndarray]
    changes: dict[str, dict[str, int]] = field(default_factory=dict)  # pass name -> change -> count
    folded_values: dict[str, str] = field(default_factory=dict)  # initializer -> FX node
    seconds: float = 0.0


def optimize_ir(model: ir.Model, passes: tuple[Pass, ...] = PASSES) -> tuple[dict[str, dict[str, int]], dict[str, str]]:
    """Run `passes` on `model` in place, in order. Returns what each changed and the FX values
    folded into initializers (initializer name -> FX node), also written to the model's
    `roundtrip.folded_values` metadata."""
    computed = {value.name: node.metadata_props[FX_NODE_KEY]
                for node in model.graph if FX_NODE_KEY in node.metadata_props
                for value in node.outputs if value.name and "::" not in value.name}
    changes: dict[str, dict[str, int]] = {}
    for step in passes:
        counts: Counter[str] = step.run(model)
        if counts:
            changes[step.name] = dict(counts)
            logger.debug("%s: %s", step.name, dict(counts))
    folded = dict(json.loads(model.metadata_props.get(FOLDED_VALUES_KEY, "{}")))
    folded.update({name: computed[name] for name in model.graph.initializers if name in computed})
    if folded:
        model.metadata_props[FOLDED_VALUES_KEY] = json.dumps(folded)
    return changes, folded


def optimize(skeleton: onnx.ModelProto, weights: dict[str, np.ndarray],
             passes: tuple[Pass, ...] = PASSES) -> Optimized:
    """Optimise an exported model given as skeleton and weights (exporter.external_data); the
    weights the passes leave alone are passed through without a copy."""
    started = time.perf_counter()
    model = to_ir(skeleton, weights)
    changes, folded = optimize_ir(model, passes)
    new_skeleton, new_weights = from_ir(model)
    return Optimized(new_skeleton, new_weights, changes, folded, time.perf_counter() - started)
