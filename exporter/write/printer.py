"""The seed's human-readable graph listing, each node with its scope; an optimised node also
with the region of FX nodes it stands for, and the FX values folded into initializers."""

from __future__ import annotations

import json

import onnx
from onnx import helper

from exporter.contract.keys import FOLDED_VALUES_KEY, REGION_KEY, SCOPE_KEY, SOURCE_KEY

_ELEM_NAMES = {
    onnx.TensorProto.FLOAT: "Float", onnx.TensorProto.DOUBLE: "Double", onnx.TensorProto.FLOAT16: "Half",
    onnx.TensorProto.BFLOAT16: "BFloat16", onnx.TensorProto.INT64: "Long", onnx.TensorProto.INT32: "Int",
    onnx.TensorProto.INT16: "Short", onnx.TensorProto.INT8: "Char", onnx.TensorProto.UINT8: "Byte",
    onnx.TensorProto.BOOL: "Bool",
}


def _type_text(info: onnx.ValueInfoProto | None) -> str:
    if info is None or not info.type.HasField("tensor_type"):
        return "UNKNOWN_TYPE"
    tensor = info.type.tensor_type
    name = _ELEM_NAMES.get(tensor.elem_type, onnx.TensorProto.DataType.Name(tensor.elem_type).title())
    if not tensor.HasField("shape"):
        return name
    dims = [str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?") for d in tensor.shape.dim]
    return f"{name}({', '.join(dims)})"


def _attr_text(attribute: onnx.AttributeProto) -> str:
    value = helper.get_attribute_value(attribute)
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    elif isinstance(value, onnx.TensorProto):
        value = f"Tensor{list(value.dims)}"
    elif isinstance(value, list):
        value = [v.decode(errors="replace") if isinstance(v, bytes) else v for v in value]
    return f"{attribute.name}={value}"


def format_model(model: onnx.ModelProto) -> str:
    """Render the graph as the seed's verbose listing: types, attributes and scopes."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except Exception:  # shape inference is only a nicety for printing
        inferred = model
    graph = inferred.graph
    infos = {v.name: v for v in [*graph.input, *graph.value_info, *graph.output]}
    for init in graph.initializer:
        infos.setdefault(init.name, helper.make_tensor_value_info(init.name, init.data_type, list(init.dims)))
    params = [*graph.input, *(infos[i.name] for i in graph.initializer)]
    lines = ["graph(" + "\n      ".join(f"%{v.name} : {_type_text(infos.get(v.name))}" for v in params) + ") {"]
    for node in graph.node:
        outputs = ", ".join(f"%{o} : {_type_text(infos.get(o))}" for o in node.output)
        attrs = ", ".join(_attr_text(a) for a in node.attribute if a.name != "value")
        if node.op_type == "Constant":
            attrs = ", ".join(_attr_text(a) for a in node.attribute)
        op = f"{node.domain}::{node.op_type}" if node.domain else node.op_type
        inputs = ", ".join(f"%{i}" if i else "<none>" for i in node.input)
        meta = {p.key: p.value for p in node.metadata_props}
        scope = meta.get(SCOPE_KEY, "")
        source = meta.get(SOURCE_KEY, "")
        suffix = f", scope: {scope}" if scope else ""
        suffix += f"  # {source}" if source else ""
        lines.append(f"  {outputs} = {op}{f'[{attrs}]' if attrs else ''}({inputs}){suffix}")
        if meta.get(REGION_KEY):  # an optimised node: every FX node it stands for
            members = json.loads(meta[REGION_KEY])
            lines.append("      region: " + ", ".join(
                f"{m['fx_node']} ({m['aten']}, {m['scope']}  # {m['source']})" for m in members))
    folded = {p.key: p.value for p in model.metadata_props}.get(FOLDED_VALUES_KEY)
    for name, fx_node in (json.loads(folded) if folded else {}).items():
        lines.append(f"  # %{name} : folded at export from FX node {fx_node}")
    lines.append("  return (" + ", ".join(f"%{o.name}" for o in graph.output) + ");")
    lines.append("}")
    return "\n".join(lines)
