"""Zoo models with a planted export fault, as `roundtrip verify` factories, to see a failing case
the way a user does: `roundtrip verify tests.planted_models:resnet18_relu_3_as_sigmoid
--model-explorer` (the terminal's lines, index.html's links, Model Explorer's colours).

The fault is an override of one symbolic (exporter.register_symbolic) in the worker process that
builds the case: resnet18's fourth ReLU (FX node relu_3) exports as Sigmoid, every other op as
usual.
"""

from __future__ import annotations

import itertools
from typing import Any


def resnet18_relu_3_as_sigmoid() -> dict[str, Any]:
    """resnet18 of the zoo (seed 0, its traced inputs) whose relu_3 exports as Sigmoid."""
    import exporter
    import model_zoo_cases

    calls = itertools.count()

    def relu_or_sigmoid(g, x):
        return g.op("Sigmoid" if next(calls) == 3 else "Relu", x)

    exporter.register_symbolic("aten::relu", relu_or_sigmoid)
    case = model_zoo_cases.get("resnet18")
    return {"module": case.module(0), "args": case.inputs(0), "input_names": case.input_names,
            "dynamic_axes": {k: v for k, v in case.dynamic_axes.items() if k in case.input_names}}
