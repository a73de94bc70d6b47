"""Model Explorer node data for a verified case: each op's verdict on both graphs.

Google's Model Explorer (`pip install ai-edge-model-explorer model-explorer-onnx`) draws the ONNX
model (through the `model_explorer_onnx` adapter) and the torch.export program (`.pt2`, its
built-in adapter) side by side. This module renders, from a case's op rows (the rows' `to_dict`
data, as the report keeps them), the files it reads:

* node data, one file per quantity and graph: the x-allowed ratio coloured pass / near / fail,
  the isolated and the accumulated error, the attribution against the fp64 truth, the dtype
  (and, where rows carry them, the precision the backend ran at and the backend);
* a sync-navigation mapping from the provenance of the ONNX nodes (`roundtrip.fx_node`, and
  `roundtrip.region` for a node standing for several FX nodes): selecting a node on one side
  selects its counterparts on the other;
* the URL that opens both graphs in a running server with an op selected on each side, and the
  command that starts it.

Node ids are the adapters' own: an ONNX node's id is its name (`<node_I>` for an unnamed I-th
node), an FX node's id is its name; a node data file is keyed by graph id (the ONNX graph's name,
`<main>` when it has none; `graph` for an ExportedProgram). This module imports neither torch nor
Model Explorer: files that need torch are written by `harness.report.explorer_files`.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

from exporter.contract.keys import FX_NODE_KEY, REGION_KEY
from harness.report.document import as_float
from harness.report.summary import measured, op_name, ratio

ONNX_EXTENSION = "model_explorer_onnx"  # the ONNX adapter's module, for `model-explorer --extensions`
PROGRAM_GRAPH_ID = "graph"  # the id Model Explorer's ExportedProgram adapter gives its one graph
UNNAMED_ONNX_GRAPH = "<main>"  # the id the ONNX adapter gives a main graph without a name
QUANTITIES = ("x_allowed", "isolated", "accumulated", "attribution", "dtype")
SIDES = ("onnx", "torch")
_LARGEST = 1e300  # the last threshold: every finite ratio sits under it


@dataclass(frozen=True)
class Style:
    """Colours and the 'near' ratio (harness/report/data/model_explorer.json)."""

    near_ratio: float
    colours: dict[str, str]
    error_gradient: list[str]
    attribution_colours: dict[str, str]
    server_port: int

    @staticmethod
    @lru_cache(maxsize=1)
    def shipped() -> Style:
        data = json.loads((Path(__file__).parent / "data" / "model_explorer.json").read_text())
        return Style(float(data["near_ratio"]), dict(data["colours"]), list(data["error_gradient"]),
                     dict(data["attribution_colours"]), int(data["server_port"]))


def onnx_node_ids(node_names: Sequence[str]) -> list[str]:
    """The ids the ONNX adapter gives the main graph's nodes, in order: the node's name, or
    `<node_I>` for an unnamed I-th node."""
    return [name or f"<node_{index}>" for index, name in enumerate(node_names)]


def onnx_graph_id(graph_name: str) -> str:
    return graph_name or UNNAMED_ONNX_GRAPH


def verdict_class(row: Mapping[str, Any], style: Style | None = None) -> str:
    """'fail' (the op failed), 'near' (passed, over `near_ratio` of what it was allowed), 'pass',
    or '' (not measured: no verdict)."""
    style = style or Style.shipped()
    if row.get("passed") is False:
        return "fail"
    if row.get("passed") is None or measured(row)[1] is None:
        return ""
    return "near" if ratio(row) > style.near_ratio else "pass"


def _finite(value: Any) -> float | None:
    """A number as the node panel shows it: 4 significant digits, infinity as the largest."""
    number = as_float(value)
    if number is None or math.isnan(number):
        return None
    return float(f"{min(number, _LARGEST) if number > 0 else max(number, -_LARGEST):.4g}")


def dtype_text(row: Mapping[str, Any]) -> str:
    """`float32`; with the rows' backend fields: `float32, ran float16 (hint) on openvino:precision=f16`
    (the precision the backend really ran the op at, when it differs, and the backend verified)."""
    text = str(row.get("dtype") or "*")
    ran = row.get("runtime_precision") or {}
    precision = ran.get("precision") if isinstance(ran, Mapping) else str(ran)
    if precision and precision != row.get("dtype"):
        source = ran.get("source") if isinstance(ran, Mapping) else ""
        text += f", ran {precision}" + (f" ({source})" if source else "")
    if row.get("backend"):
        text += f" on {row['backend']}"
    return text


def attribution_text(row: Mapping[str, Any]) -> str:
    """`backend`, `both-noise`, ...; with a blame across backends: `backend (blame: runtime)`."""
    attribution = str(row.get("attribution") or "")
    return f"{attribution} (blame: {row['blame']})" if attribution and row.get("blame") else attribution


def row_values(row: Mapping[str, Any], style: Style | None = None) -> dict[str, tuple[Any, str | None]]:
    """{quantity: (value, background colour or None)} of one op row; a quantity the row does not
    have is left out."""
    style = style or Style.shipped()
    values: dict[str, tuple[Any, str | None]] = {}
    verdict = verdict_class(row, style)
    score = _finite(ratio(row)) if measured(row)[1] is not None else None
    if score is not None:
        values["x_allowed"] = (score, style.colours.get(verdict))
    for key in ("isolated", "accumulated"):
        error = _finite((row.get(key) or {}).get("max_abs"))
        if error is not None:
            values[key] = (error, None)
    attribution = str(row.get("attribution") or "")
    if attribution:
        values["attribution"] = (attribution_text(row), style.attribution_colours.get(attribution))
    values["dtype"] = (dtype_text(row), None)
    return values


def fx_members(row: Mapping[str, Any]) -> list[str]:
    """The FX nodes an op row stands for: its region's members (an optimised node), else itself."""
    members = [m["fx_node"] for m in row.get("region") or [] if m.get("fx_node")]
    return members or [str(row["fx_node"])]


def _graph_node_data(results: Mapping[str, tuple[Any, str | None]], quantity: str, case: str,
                     style: Style) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": f"{case}: {quantity.replace('_', '-')}",
        "results": {node: ({"value": value, "bgColor": colour} if colour else {"value": value})
                    for node, (value, colour) in results.items()},
    }
    if quantity == "x_allowed":
        data["thresholds"] = [{"value": style.near_ratio, "bgColor": style.colours["pass"]},
                              {"value": 1.0, "bgColor": style.colours["near"]},
                              {"value": _LARGEST, "bgColor": style.colours["fail"]}]
    elif quantity in ("isolated", "accumulated") and results:
        stops = style.error_gradient
        data["gradient"] = [{"stop": i / (len(stops) - 1), "bgColor": colour} for i, colour in enumerate(stops)]
    return data


def node_data(rows: Iterable[Mapping[str, Any]], *, side: str, graph_id: str, case: str,
              style: Style | None = None, known_ids: set[str] | None = None) -> dict[str, dict[str, Any]]:
    """{quantity: node data file content} for one graph.

    side 'onnx': each row's values go on its ONNX nodes (`onnx_nodes`); 'torch': on its FX node
    and, for an optimised region, on every FX node inside it. `known_ids` (the graph's node ids)
    drops nodes the graph does not draw. A node shared by two rows keeps the worse one.
    """
    if side not in SIDES:
        raise ValueError(f"side {side!r}: expected one of {SIDES}")
    style = style or Style.shipped()
    per_quantity: dict[str, dict[str, tuple[Any, str | None]]] = {q: {} for q in QUANTITIES}
    rank: dict[str, float] = {}
    for row in sorted(rows, key=lambda r: (r.get("passed") is False, ratio(r))):  # worse rows last win
        nodes = list(row.get("onnx_nodes") or []) if side == "onnx" else fx_members(row)
        values = row_values(row, style)
        for node in nodes:
            if known_ids is not None and node not in known_ids:
                continue
            rank[node] = ratio(row)
            for quantity, entry in values.items():
                per_quantity[quantity][node] = entry
    return {quantity: {graph_id: _graph_node_data(results, quantity, case, style)}
            for quantity, results in per_quantity.items() if results}


def sync_mapping(nodes: Iterable[tuple[str, str, Sequence[str]]]) -> dict[str, Any]:
    """Model Explorer's sync-navigation mapping, left the ONNX graph, right the FX program.

    `nodes`: (ONNX node id, its `roundtrip.fx_node`, the FX nodes of its `roundtrip.region`) in
    graph order. ONNX nodes emitted for the same FX nodes form one entry (1:N both ways: a
    decomposed op's several ONNX nodes, an optimised node's several FX nodes)."""
    entries: dict[tuple[str, ...], list[str]] = {}
    for node_id, fx_node, region in nodes:
        members = tuple(region) if region else ((fx_node,) if fx_node else ())
        if members:
            entries.setdefault(members, []).append(node_id)
    return {"mappingEntries": [{"leftNodeIds": left, "rightNodeIds": list(right)} for right, left in entries.items()],
            "disableMappingFallback": True}


def provenance_nodes(model: Any, fx_node_of: Callable[[Any], str | None] | None = None) -> list[tuple[str, str, list[str]]]:
    """(adapter node id, FX node, region FX nodes) for each node of an onnx.ModelProto's main
    graph. `fx_node_of(node)` reads a node's FX node (harness.analysis.fx_mapping.fx_node_name
    also reads torch.onnx's key); by default `roundtrip.fx_node`."""
    ids = onnx_node_ids([node.name for node in model.graph.node])
    found = []
    for node_id, node in zip(ids, model.graph.node):
        meta = {entry.key: entry.value for entry in node.metadata_props}
        region = [m["fx_node"] for m in json.loads(meta[REGION_KEY])] if meta.get(REGION_KEY) else []
        fx_node = fx_node_of(node) if fx_node_of is not None else meta.get(FX_NODE_KEY)
        found.append((node_id, fx_node or "", region))
    return found


# --- opening the files ---------------------------------------------------------------------------


def server_command(port: int | None = None) -> list[str]:
    """The command that starts a Model Explorer server able to read ONNX files, without a browser."""
    port = port or Style.shipped().server_port
    return ["model-explorer", f"--extensions={ONNX_EXTENSION}", "--no_open_in_browser", f"--port={port}"]


def open_command(entry: Mapping[str, Any], report_dir: str | os.PathLike) -> list[str]:
    """`model-explorer MODEL.onnx,PROGRAM.pt2 --extensions=model_explorer_onnx
    --node_data_paths=...`: both graphs with the x-allowed and attribution node data (each file is
    keyed by its own graph's id, so it colours its own graph only)."""
    base = Path(report_dir)
    models = [str(base / entry["onnx"])] + ([str(base / entry["program"])] if entry.get("program") else [])
    data = [str(base / entry["node_data"][side][q]) for side in SIDES for q in ("x_allowed", "attribution")
            if q in entry["node_data"].get(side, {})]
    command = ["model-explorer", ",".join(models), f"--extensions={ONNX_EXTENSION}"]
    return command + ([f"--node_data_paths={','.join(data)}"] if data else [])


def explorer_url(entry: Mapping[str, Any], report_dir: str | os.PathLike, *, onnx_node: str = "", fx_node: str = "",
                 quantity: str = "x_allowed", port: int | None = None, host: str = "127.0.0.1") -> str:
    """A URL for a running server (`server_command`) that opens the ONNX graph and the FX program
    side by side, each coloured by `quantity`, with `onnx_node` and `fx_node` selected."""
    base = Path(report_dir).resolve()
    port = port or Style.shipped().server_port
    onnx_path = str(base / entry["onnx"])
    models = [{"url": onnx_path, "adapterId": "onnx_adapter"}]
    node_data, targets = [], []
    panes = [{"deepestExpandedGroupNodeIds": [], "selectedNodeId": onnx_node, "selectedGraphId": entry["onnx_graph"],
              "selectedCollectionLabel": "", "widthFraction": 1}]
    if quantity in entry["node_data"].get("onnx", {}):
        node_data.append(str(base / entry["node_data"]["onnx"][quantity]))
        targets.append(os.path.basename(onnx_path))
    if entry.get("program"):
        program_path = str(base / entry["program"])
        models.append({"url": program_path, "adapterId": "builtin_pytorch_exportedprogram"})
        panes[0]["widthFraction"] = 0.5
        panes.append({"deepestExpandedGroupNodeIds": [], "selectedNodeId": fx_node, "selectedGraphId": PROGRAM_GRAPH_ID,
                      "selectedCollectionLabel": "", "widthFraction": 0.5})
        if quantity in entry["node_data"].get("torch", {}):
            node_data.append(str(base / entry["node_data"]["torch"][quantity]))
            targets.append(os.path.basename(program_path))
    data = {"models": models, "nodeData": node_data, "nodeDataTargets": targets, "uiState": {"paneStates": panes}}
    return f"http://{host}:{port}/?data={quote(json.dumps(data, separators=(',', ':')))}&renderer=webgl"


def failing_links(case: Mapping[str, Any], report_dir: str | os.PathLike) -> list[dict[str, str]]:
    """One entry per failing op of a case written with Model Explorer files: the op, its ONNX and
    FX node ids, and the URL that opens it on both graphs."""
    entry = case.get("model_explorer")
    if not entry:
        return []
    nodes = entry.get("op_nodes", {})
    links = []
    for row in (case.get("verification") or {}).get("ops", []):
        if row.get("passed") is not False:
            continue
        onnx_ids = nodes.get(row["fx_node"], [])
        onnx_node, fx_node = (onnx_ids[0] if onnx_ids else ""), fx_members(row)[-1]
        links.append({"op": op_name(row), "onnx_node": onnx_node, "fx_node": fx_node,
                      "url": explorer_url(entry, report_dir, onnx_node=onnx_node, fx_node=fx_node)})
    return links
