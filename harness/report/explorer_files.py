"""Write a case's Model Explorer files (`roundtrip run --model-explorer`) into the report:

  model_explorer/<case>/model.onnx       the ONNX model as verified, graph only (weights left out)
  model_explorer/<case>/program.pt2      the torch.export program, shapes at the traced size,
                                         parameters stored as zeros of their shape
  model_explorer/<case>/{onnx,torch}.<quantity>.json   node data (harness.report.model_explorer)
  model_explorer/<case>/sync.json        the sync-navigation mapping, ONNX left, FX right

Model Explorer draws graphs, not weights, so neither file carries them: a report of the full zoo
stays small. Its ExportedProgram adapter cannot read a program with symbolic sizes (it writes
every output's shape as JSON, and a SymInt is not JSON), so the program is written specialised to
the traced size: each size read replaced by its traced value. FX node names are kept, so the
rows' FX node ids are the adapter's.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

import onnx

from harness.report import model_explorer as me
from harness.report.files import write_text

FOLDER = "model_explorer"
MAX_INLINE_ELEMENTS = 16  # initializers up to this size keep their values (Model Explorer shows them)


def graph_only(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of `model` whose initializers over MAX_INLINE_ELEMENTS elements hold no data (marked
    external at a location that does not exist): what Model Explorer's ONNX adapter reads, which
    never loads external data."""
    light = onnx.ModelProto()
    light.CopyFrom(model)
    for tensor in light.graph.initializer:
        elements = 1
        for dim in tensor.dims:
            elements *= dim
        if elements > MAX_INLINE_ELEMENTS or tensor.data_location == onnx.TensorProto.EXTERNAL:
            kept = [(e.key, e.value) for e in tensor.external_data if e.key != "location"]
            for field in ("raw_data", "float_data", "int32_data", "int64_data", "double_data", "uint64_data",
                          "string_data", "external_data"):
                tensor.ClearField(field)
            tensor.data_location = onnx.TensorProto.EXTERNAL
            entry = tensor.external_data.add()
            entry.key, entry.value = "location", "weights-not-saved"
            for key, value in kept:
                if key in ("offset", "length"):
                    extra = tensor.external_data.add()
                    extra.key, extra.value = key, value
    return light


def viewer_program(program: Any) -> Any:
    """`program` as Model Explorer's adapter can read it: sizes at their traced values, parameters
    and buffers zeros of their shape and dtype (stride 0: a few bytes each), node names kept."""
    import torch
    from torch._guards import detect_fake_mode
    from torch.fx.node import map_arg

    module = copy.deepcopy(program.graph_module)
    graph = module.graph

    def traced(tensor: Any) -> Any:
        if not isinstance(tensor, torch.Tensor) or all(isinstance(d, int) for d in tensor.shape):
            return tensor
        shape = [d if isinstance(d, int) else int(d.node.hint) for d in tensor.shape]
        with detect_fake_mode([tensor]):
            return torch.empty(shape, dtype=tensor.dtype, device=tensor.device)

    for node in reversed(list(graph.nodes)):  # size reads become their traced values
        value = node.meta.get("val")
        if node.op == "call_function" and isinstance(value, torch.SymInt):
            size = int(value.node.hint)
            for user in list(node.users):
                user.args = map_arg(user.args, lambda a, n=node, s=size: s if a is n else a)
                user.kwargs = map_arg(user.kwargs, lambda a, n=node, s=size: s if a is n else a)
            graph.erase_node(node)
    for node in graph.nodes:
        value = node.meta.get("val")
        node.meta["val"] = type(value)(traced(v) for v in value) if isinstance(value, (tuple, list)) else traced(value)
    module.recompile()

    def zeros(tensor: Any) -> Any:
        if not isinstance(tensor, torch.Tensor):
            return tensor
        empty = torch.zeros((), dtype=tensor.dtype).expand(tensor.shape)
        return torch.nn.Parameter(empty, requires_grad=tensor.requires_grad) if isinstance(
            tensor, torch.nn.Parameter) else empty

    return torch.export.ExportedProgram(
        root=module, graph=graph, graph_signature=program.graph_signature,
        state_dict={k: zeros(v) for k, v in program.state_dict.items()}, range_constraints={},
        module_call_graph=program.module_call_graph, constants={k: zeros(v) for k, v in program.constants.items()},
        verifiers=program.verifiers)


def write_case_files(report_dir: str | os.PathLike, case_folder: str, *, case: str, rows: Sequence[Mapping[str, Any]],
                     onnx_model: onnx.ModelProto | str, program: Any = None) -> dict[str, Any]:
    """Write the case's files under `report_dir/model_explorer/case_folder`; return the case's
    `model_explorer` entry (paths relative to the report directory).

    `rows`: the case's op rows as the report keeps them, each with its `onnx_nodes`. `program`:
    the torch.export program whose FX nodes the rows name (None: the ONNX side only)."""
    if isinstance(onnx_model, (str, os.PathLike)):
        onnx_model = onnx.load(os.fspath(onnx_model), load_external_data=False)
    folder = os.path.join(FOLDER, case_folder)
    directory = os.path.join(os.fspath(report_dir), folder)
    os.makedirs(directory, exist_ok=True)
    onnx_path = os.path.join(folder, "model.onnx")
    onnx.save(graph_only(onnx_model), os.path.join(os.fspath(report_dir), onnx_path))
    graph_id = me.onnx_graph_id(onnx_model.graph.name)
    onnx_ids = set(me.onnx_node_ids([n.name for n in onnx_model.graph.node]))
    entry: dict[str, Any] = {"onnx": onnx_path, "onnx_graph": graph_id, "program": None,
                             "node_data": {}, "sync": None, "op_nodes": {}}
    sides = {"onnx": (graph_id, onnx_ids)}
    if program is not None:
        import torch

        program_path = os.path.join(folder, "program.pt2")
        torch.export.save(viewer_program(program), os.path.join(os.fspath(report_dir), program_path))
        entry["program"] = program_path
        sides["torch"] = (me.PROGRAM_GRAPH_ID, {n.name for n in program.graph.nodes})
        sync_path = os.path.join(folder, "sync.json")
        from harness.analysis.fx_mapping import fx_node_name  # roundtrip's and torch.onnx's provenance keys

        write_text(os.path.join(os.fspath(report_dir), sync_path),
                   json.dumps(me.sync_mapping(me.provenance_nodes(onnx_model, fx_node_name)), indent=1) + "\n")
        entry["sync"] = sync_path
    for side, (graph, known) in sides.items():
        files = me.node_data(rows, side=side, graph_id=graph, case=case, known_ids=known)
        entry["node_data"][side] = {}
        for quantity, content in files.items():
            path = os.path.join(folder, f"{side}.{quantity}.json")
            write_text(os.path.join(os.fspath(report_dir), path), json.dumps(content, indent=1) + "\n")
            entry["node_data"][side][quantity] = path
    entry["op_nodes"] = {row["fx_node"]: [n for n in row.get("onnx_nodes") or [] if n in onnx_ids]
                         for row in rows if row.get("passed") is False}
    return entry
