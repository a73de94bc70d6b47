"""The optimisation stage after translation: passes over onnx_ir that keep per-op provenance.

`optimize(skeleton, weights)` runs `PASSES` in order, under onnx_ir's `PassManager` (constant folding, BatchNorm folded into
Conv/ConvTranspose/Gemm, fused HardSwish/HardSigmoid, no-op removal, static shape sub-graphs,
deduplicated constants) and returns the optimised skeleton and weights with what each pass
changed. A node that a rewrite made stands for every FX node it replaced
(`roundtrip.region`, exporter.optimize.regions); an FX value folded into an initializer is
recorded in the model's `roundtrip.folded_values`, and one merged into another value (a
removed no-op, a shared sub-expression) in `roundtrip.aliased_values`.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import onnx
import onnx_ir as ir

from exporter.optimize import aliases
from exporter.optimize.bridge import to_ir
from exporter.contract.keys import ALIASED_VALUES_KEY, FOLDED_VALUES_KEY, LEDGER_META
from exporter.optimize.passes import PASSES, WEIGHT_FOLDING, Ledger, Pass, fx_values
from exporter.translate.ir_model import to_skeleton

__all__ = ["FOLDED_VALUES_KEY", "PASSES", "WEIGHT_FOLDING", "Applied", "Optimized", "Pass", "optimize", "optimize_ir"]

logger = logging.getLogger(__name__)


@dataclass
class Applied:
    """What running the passes did: the changes per pass, the FX values folded into
    initializers and merged into other values, and each pass's process CPU time."""

    changes: dict[str, dict[str, int]] = field(default_factory=dict)  # pass name -> change -> count
    folded_values: dict[str, str] = field(default_factory=dict)  # initializer -> FX node
    aliased_values: dict[str, str] = field(default_factory=dict)  # merged value -> value carrying it
    cpu_seconds: dict[str, float] = field(default_factory=dict)  # pass name -> process CPU time


@dataclass
class Optimized:
    """An optimised model (skeleton and weights) and what each pass changed."""

    skeleton: onnx.ModelProto
    weights: dict[str, np.ndarray]
    changes: dict[str, dict[str, int]] = field(default_factory=dict)  # pass name -> change -> count
    folded_values: dict[str, str] = field(default_factory=dict)  # initializer -> FX node
    seconds: float = 0.0
    aliased_values: dict[str, str] = field(default_factory=dict)  # merged value -> value carrying it
    cpu_seconds: dict[str, float] = field(default_factory=dict)  # pass (and "bridge") -> process CPU time


def optimize_ir(model: ir.Model, passes: Sequence[ir.passes.PassBase] = PASSES) -> Applied:
    """Run `passes` on `model` in place, in order, under onnx_ir's `PassManager`. Returns what
    each changed, the FX values folded into initializers (initializer name -> FX node, also
    written to the model's `roundtrip.folded_values` metadata) and those merged into another
    value by a removed no-op or a shared sub-expression (`roundtrip.aliased_values`,
    exporter.optimize.aliases)."""
    graph = model.graph
    ledger = Ledger(fx_values(graph), merged=dict(json.loads(model.metadata_props.get(ALIASED_VALUES_KEY, "{}"))))
    model.meta[LEDGER_META] = ledger
    try:
        if passes:
            ir.passes.PassManager(list(passes))(model)
    finally:
        del model.meta[LEDGER_META]
    folded = dict(json.loads(model.metadata_props.get(FOLDED_VALUES_KEY, "{}")))
    folded.update({name: ledger.watched[name] for name in graph.initializers if name in ledger.watched})
    if folded:
        model.metadata_props[FOLDED_VALUES_KEY] = json.dumps(folded)
    applied = Applied(changes=ledger.changes, folded_values=folded, cpu_seconds=ledger.cpu_seconds)
    applied.aliased_values = aliases.resolved(ledger.merged, aliases.present_values(graph))
    if applied.aliased_values:
        model.metadata_props[ALIASED_VALUES_KEY] = json.dumps(applied.aliased_values)
    return applied


def optimize(skeleton: onnx.ModelProto, weights: dict[str, np.ndarray],
             passes: Sequence[ir.passes.PassBase] = PASSES) -> Optimized:
    """Optimise an exported model given as skeleton and weights (exporter.write.external_data); the
    weights the passes leave alone are passed through without a copy."""
    started, cpu = time.perf_counter(), time.process_time()
    model = to_ir(skeleton, weights)
    bridge = time.process_time() - cpu
    applied = optimize_ir(model, passes)
    cpu = time.process_time()
    new_skeleton, new_weights = to_skeleton(model)
    applied.cpu_seconds["bridge"] = bridge + time.process_time() - cpu
    return Optimized(new_skeleton, new_weights, applied.changes, applied.folded_values,
                     time.perf_counter() - started, applied.aliased_values, applied.cpu_seconds)
