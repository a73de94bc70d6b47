"""Planted faults in QDQ models, for the localisation tests of quantized verification.

Each fault changes one Q or DQ node of an exported model the way a broken exporter would, and
returns the FX node it belongs to (the row that must fail): a wrong scale on a QuantizeLinear,
a zero point off by one, a per-channel DequantizeLinear's axis swapped, a DequantizeLinear
replaced by a Cast. Parameters get new initializers, so a scale shared with a DQ stays right.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import numpy as np
import onnx
from onnx import helper, numpy_helper

Fault = Callable[[onnx.ModelProto], tuple[onnx.ModelProto, str]]


def fx_node(node: onnx.NodeProto) -> str:
    return next(p.value for p in node.metadata_props if p.key == "roundtrip.fx_node")


def _constant(model: onnx.ModelProto, name: str) -> np.ndarray:
    for tensor in model.graph.initializer:
        if tensor.name == name:
            return numpy_helper.to_array(tensor)
    for node in model.graph.node:
        if node.op_type == "Constant" and node.output[0] == name:
            return numpy_helper.to_array(node.attribute[0].t)
    raise KeyError(f"{name} is neither an initializer nor a Constant")


def _activation_quantizers(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """QuantizeLinear nodes that quantize an op's output (not the graph input), in graph order."""
    inputs = {i.name for i in model.graph.input}
    return [n for n in model.graph.node if n.op_type == "QuantizeLinear" and n.input[0] not in inputs]


def _replace_parameter(model: onnx.ModelProto, node: onnx.NodeProto, index: int, value: np.ndarray) -> None:
    name = f"{node.output[0]}__planted_{index}"
    model.graph.initializer.append(numpy_helper.from_array(value, name))
    node.input[index] = name


def wrong_scale(position: int = 1, factor: float = 1.5) -> Fault:
    """The `position`-th activation QuantizeLinear divides by `factor` x its scale."""
    def plant(model: onnx.ModelProto) -> tuple[onnx.ModelProto, str]:
        model = copy.deepcopy(model)
        node = _activation_quantizers(model)[position]
        _replace_parameter(model, node, 1, (_constant(model, node.input[1]) * factor).astype(np.float32))
        return model, fx_node(node)
    plant.__name__ = "wrong_scale"
    return plant


def zero_point_off_by_one(position: int = 1) -> Fault:
    """The `position`-th activation QuantizeLinear adds zero point + 1."""
    def plant(model: onnx.ModelProto) -> tuple[onnx.ModelProto, str]:
        model = copy.deepcopy(model)
        node = _activation_quantizers(model)[position]
        zero_point = _constant(model, node.input[2])
        _replace_parameter(model, node, 2, (zero_point.astype(np.int64) + 1).astype(zero_point.dtype))
        return model, fx_node(node)
    plant.__name__ = "zero_point_off_by_one"
    return plant


def axis_swapped() -> Fault:
    """The first per-channel DequantizeLinear of a square weight (as many output as input
    channels) dequantizes along axis 1 instead of 0."""
    def plant(model: onnx.ModelProto) -> tuple[onnx.ModelProto, str]:
        model = copy.deepcopy(model)
        shapes = {t.name: tuple(t.dims) for t in model.graph.initializer}
        for node in model.graph.node:
            axis = next((a for a in node.attribute if a.name == "axis"), None)
            shape = shapes.get(node.input[0])
            if node.op_type == "DequantizeLinear" and axis is not None and shape and len(shape) > 1 \
                    and shape[0] == shape[1] and axis.i == 0:
                axis.i = 1
                return model, fx_node(node)
        raise ValueError("no per-channel DequantizeLinear of a square weight to swap")
    plant.__name__ = "axis_swapped"
    return plant


def dequantize_as_cast(position: int = 1) -> Fault:
    """The `position`-th DequantizeLinear of an activation becomes a Cast to float (its scale
    and zero point forgotten)."""
    def plant(model: onnx.ModelProto) -> tuple[onnx.ModelProto, str]:
        model = copy.deepcopy(model)
        quantized = {n.output[0] for n in model.graph.node if n.op_type == "QuantizeLinear"}
        chosen = [i for i, n in enumerate(model.graph.node) if n.op_type == "DequantizeLinear" and n.input[0] in quantized]
        index = chosen[position]
        old = model.graph.node[index]
        cast = helper.make_node("Cast", [old.input[0]], list(old.output), name=old.name, to=onnx.TensorProto.FLOAT)
        cast.metadata_props.extend(old.metadata_props)
        model.graph.node.remove(old)
        model.graph.node.insert(index, cast)
        return model, fx_node(cast)
    plant.__name__ = "dequantize_as_cast"
    return plant


FAULTS: dict[str, Fault] = {
    "wrong_scale": wrong_scale(), "zero_point_off_by_one": zero_point_off_by_one(),
    "axis_swapped": axis_swapped(), "dequantize_as_cast": dequantize_as_cast(),
}
