"""Model Explorer files (`roundtrip run --model-explorer`): node data keyed by the ids Model
Explorer's own adapters give the nodes, a sync mapping between both graphs, and, as a user sees
it, the planted fault red with its value on both graphs in the real app.

The adapters are loaded in Python (model_explorer_onnx's ONNXAdapter, Model Explorer's built-in
ExportedProgram adapter), so the ids are theirs, not ours. The browser test starts Model
Explorer's server (its `model-explorer` command, on 127.0.0.1, no browser opened) and opens the
report's URL in Debian's headless Chromium over the DevTools protocol; it checks the DOM of the
node panels. CI runs it on a small model, the nightly tier on resnet18 (the zoo case). The
screenshot goes to $ROUNDTRIP_MODEL_EXPLORER_SCREENSHOT when set (docs/model_explorer.png was
made so), else into the test's temporary directory.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import onnx
import pytest
import torch

import exporter
import harness
from harness.report import model_explorer as me
from harness.report.document import case_from_verification
from harness.report.explorer_files import write_case_files

pytest.importorskip("model_explorer", reason="ai-edge-model-explorer is not installed (pip install -e '.[test]')")
pytest.importorskip("model_explorer_onnx", reason="model-explorer-onnx is not installed (pip install -e '.[test]')")

STYLE = me.Style.shipped()


class Net(torch.nn.Module):
    """conv -> batch_norm (folded into the Conv: a region of two FX nodes) -> relu -> linear."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.bn = torch.nn.BatchNorm2d(4)
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).mean((2, 3)))


def _planted(model: onnx.ModelProto, fx_node: str) -> onnx.ModelProto:
    """A copy of `model` whose ONNX node for `fx_node` (a Relu) computes Sigmoid."""
    altered = onnx.ModelProto()
    altered.CopyFrom(model)
    node = next(n for n in altered.graph.node if n.name == fx_node)
    assert node.op_type == "Relu"
    node.op_type = "Sigmoid"
    return altered


def _rows(verification, case):
    full = verification.to_dict()["ops"]
    return [{**row, "onnx_nodes": source["onnx_nodes"]} for row, source in zip(case["verification"]["ops"], full)]


def _adapter_ids(entry, report: Path) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """{graph id: node ids} as Model Explorer's ONNX and ExportedProgram adapters read the files."""
    from model_explorer.builtin_pytorch_exportedprogram_adapter import BuiltinPytorchExportedProgramAdapter
    from model_explorer.consts import DEFAULT_SETTINGS
    from model_explorer_onnx.main import ONNXAdapter

    onnx_graphs = ONNXAdapter().convert(str(report / entry["onnx"]), dict(DEFAULT_SETTINGS))["graphs"]
    torch_graphs = BuiltinPytorchExportedProgramAdapter().convert(str(report / entry["program"]),
                                                                  dict(DEFAULT_SETTINGS))["graphs"]
    return ({g.id: {n.id for n in g.nodes} for g in onnx_graphs}, {g.id: {n.id for n in g.nodes} for g in torch_graphs})


@pytest.fixture(scope="module")
def small_case(tmp_path_factory):
    torch.manual_seed(0)
    model = Net().eval()
    args = (torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(1)),)
    program = exporter.export_program(model, args, dynamic_axes={"x": {0: "batch"}}).program
    clean = exporter.export(model, args, dynamic_axes={"x": {0: "batch"}})
    verification = harness.verify(model, args, onnx_model=_planted(clean, "relu"))
    case = case_from_verification(verification, name="net")
    report = tmp_path_factory.mktemp("report")
    entry = write_case_files(report, "net", case="net", rows=_rows(verification, case), onnx_model=verification.onnx_model,
                             program=program)
    return report, entry, case


def test_node_data_is_keyed_by_the_adapters_ids(small_case):
    report, entry, _ = small_case
    onnx_ids, torch_ids = _adapter_ids(entry, report)
    assert list(torch_ids) == [me.PROGRAM_GRAPH_ID] and entry["onnx_graph"] in onnx_ids
    for side, graphs in (("onnx", onnx_ids), ("torch", torch_ids)):
        assert set(entry["node_data"][side]) == set(me.QUANTITIES)
        for quantity, path in entry["node_data"][side].items():
            content = json.loads((report / path).read_text())
            (graph_id, data), = content.items()
            assert data["results"] and set(data["results"]) <= graphs[graph_id], (side, quantity)


def test_the_planted_fault_is_red_on_both_graphs_and_the_rest_green(small_case):
    report, entry, case = small_case
    rows = {row["fx_node"]: row for row in case["verification"]["ops"]}
    assert rows["relu"]["passed"] is False
    onnx_data = json.loads((report / entry["node_data"]["onnx"]["x_allowed"]).read_text())[entry["onnx_graph"]]
    torch_data = json.loads((report / entry["node_data"]["torch"]["x_allowed"]).read_text())[me.PROGRAM_GRAPH_ID]
    for results in (onnx_data["results"], torch_data["results"]):
        assert results["relu"]["bgColor"] == STYLE.colours["fail"] and results["relu"]["value"] > 1
        others = {node: result for node, result in results.items() if node != "relu"}
        assert others and all(r["bgColor"] in (STYLE.colours["pass"], STYLE.colours["near"]) for r in others.values())
    # the folded BatchNorm's row colours its Conv on the ONNX side and both FX nodes on the torch side
    region = next(row for row in case["verification"]["ops"] if row.get("region"))
    assert [m["fx_node"] for m in region["region"]] == ["conv2d", "_native_batch_norm_legit_no_training"]
    assert {"conv2d", "_native_batch_norm_legit_no_training"} <= set(torch_data["results"])
    assert onnx_data["thresholds"][-1]["bgColor"] == STYLE.colours["fail"]
    attribution = json.loads((report / entry["node_data"]["onnx"]["attribution"]).read_text())
    assert attribution[entry["onnx_graph"]]["results"]["relu"]["value"] == rows["relu"]["attribution"]


def test_sync_mapping_pairs_each_onnx_node_with_its_fx_nodes(small_case):
    report, entry, _ = small_case
    onnx_ids, torch_ids = _adapter_ids(entry, report)
    mapping = json.loads((report / entry["sync"]).read_text())
    entries = {tuple(e["leftNodeIds"]): e["rightNodeIds"] for e in mapping["mappingEntries"]}
    assert entries[("_native_batch_norm_legit_no_training",)] == ["conv2d", "_native_batch_norm_legit_no_training"]
    assert entries[("relu",)] == ["relu"]
    for left, right in entries.items():
        assert set(left) <= onnx_ids[entry["onnx_graph"]] and set(right) <= torch_ids[me.PROGRAM_GRAPH_ID]


def test_open_command_and_url_name_the_files(small_case):
    report, entry, case = small_case
    command = me.open_command(entry, report)
    assert command[0] == "model-explorer" and command[1] == f"{report / entry['onnx']},{report / entry['program']}"
    assert "--extensions=model_explorer_onnx" in command and command[-1].startswith("--node_data_paths=")
    case = {**case, "model_explorer": entry}
    (link,) = me.failing_links(case, report)
    assert link["onnx_node"] == "relu" and link["fx_node"] == "relu"
    data = json.loads(urllib.request.unquote(link["url"].split("?data=")[1].split("&")[0]))
    assert [m["url"] for m in data["models"]] == [str(report / entry["onnx"]), str(report / entry["program"])]
    assert [p["selectedNodeId"] for p in data["uiState"]["paneStates"]] == ["relu", "relu"]
    assert data["nodeDataTargets"] == ["model.onnx", "program.pt2"]


def test_index_html_links_each_failing_op_to_both_graphs(small_case):
    import html as html_text
    import re

    from harness.report.writer import write_report_dir
    from tests.test_report_document import document

    report, entry, case = small_case
    write_report_dir(document([{**case, "model_explorer": entry}]), report)
    page = (report / "index.html").read_text()
    (link,) = me.failing_links({**case, "model_explorer": entry}, report)
    anchors = re.findall(r'<a class="explorer-link" data-onnx-node="([^"]*)" data-fx-node="([^"]*)" href="([^"]*)">', page)
    assert [(a, b, html_text.unescape(c)) for a, b, c in anchors] == [("relu", "relu", link["url"])]
    assert html_text.escape(" ".join(me.open_command(entry, report)), quote=False) in page
    assert " ".join(me.server_command()) in page


def test_row_values_table():
    """x-allowed colour follows the verdict, never the ratio alone; dtype shows the runtime fields."""
    base = {"fx_node": "a", "aten": "aten.relu.default", "dtype": "float32", "attribution": "both-noise",
            "isolated": {"max_abs": 1e-6, "tolerance_ratio": 0.1}, "verdict": {"score": 0.1}}
    table = [
        ({**base, "passed": True}, STYLE.colours["pass"], "float32"),
        ({**base, "passed": True, "verdict": {"score": 0.8}}, STYLE.colours["near"], "float32"),
        ({**base, "passed": False, "verdict": {"score": 0.3}}, STYLE.colours["fail"], "float32"),  # e.g. a shape mismatch
        ({**base, "passed": True, "runtime_precision": {"precision": "float16", "source": "hint"},
          "backend": "openvino:precision=f16"}, STYLE.colours["pass"], "float32, ran float16 (hint) on openvino:precision=f16"),
        ({**base, "passed": True, "runtime_precision": {"precision": "float32", "source": "declared"},
          "backend": "onnxruntime"}, STYLE.colours["pass"], "float32 on onnxruntime"),
    ]
    for row, colour, dtype in table:
        values = me.row_values(row)
        assert values["x_allowed"][1] == colour and values["dtype"][0] == dtype, row
    assert me.row_values({**base, "passed": False, "attribution": "backend", "blame": "runtime"})["attribution"] == (
        "backend (blame: runtime)", STYLE.attribution_colours["backend"])
    assert "x_allowed" not in me.row_values({**base, "passed": None, "isolated": None, "accumulated": None,
                                             "verdict": None})


# --- in the real app ------------------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SERVER = shutil.which("model-explorer", path=os.path.dirname(sys.executable)) or shutil.which("model-explorer")
PANES_JS = """JSON.stringify([...document.querySelectorAll('.pane-container')].map(pane => {
  const rows = {};
  for (const tr of pane.querySelectorAll('tr')) {
    const cells = [...tr.querySelectorAll('td')];
    if (cells.length < 2) continue;
    const box = cells[1].querySelector('.has-bg-color');
    const text = cells[1].querySelector('.one-line-text') || cells[1];
    rows[cells[0].textContent.trim()] = [text.textContent.trim(), box ? box.style.backgroundColor : ''];
  }
  return rows;
}))"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _rgb(colour: str) -> str:
    colour = colour.lstrip("#")
    return "rgb({}, {}, {})".format(*(int(colour[i:i + 2], 16) for i in (0, 2, 4)))


@pytest.fixture
def server(tmp_path):
    if SERVER is None:
        pytest.skip("the model-explorer command is not on PATH (pip install -e '.[test]')")
    port = _free_port()
    log = open(tmp_path / "server.log", "w")
    command = [*me.server_command(port), "--host=127.0.0.1"]
    process = subprocess.Popen([SERVER, *command[1:]], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        healthy = False
        for _ in range(1200):  # a guard against a server that never answers, not a speed check
            if process.poll() is not None:
                break
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/check_health") as reply:
                    healthy = reply.read() == b"model_explorer_ok"
            except OSError:
                pass
            if healthy:
                break
            time.sleep(0.5)
        assert healthy and process.poll() is None, (tmp_path / "server.log").read_text()
        yield port
    finally:
        process.terminate()
        process.wait()
        log.close()


def _resnet18_planted(report: Path):
    """resnet18 (the zoo case) with relu_3's Relu computing Sigmoid, verified and written."""
    from harness.cli.sources import build
    from harness.exporters import export_for_verification
    from harness.verification import verify_exported

    built = build({"kind": "zoo", "case": "resnet18"}, 0)
    exported = export_for_verification("roundtrip", built.module, built.args,
                                       dynamic_axes=built.options.get("dynamic_axes"),
                                       input_names=built.options.get("input_names"))
    exported.model = _planted(exported.model, "relu_3")
    verification = verify_exported(exported, built.args, module=built.module, model_name="resnet18")
    case = case_from_verification(verification, name="resnet18")
    entry = write_case_files(report, "resnet18", case="resnet18", rows=_rows(verification, case),
                             onnx_model=verification.onnx_model, program=exported.program)
    return entry, case


def _open_in_chromium(url: str, label: str, tmp_path: Path, screenshot: Path, monkeypatch) -> list[dict]:
    """The rows of both panes' node panels ({label: [text, background]}) once both are drawn."""
    from tests import test_browser_report as browser_test

    # Model Explorer draws with WebGL: Chromium's software GL (SwiftShader) instead of no GPU at all
    flags = [f for f in browser_test.FLAGS if f != "--disable-gpu"] + ["--use-angle=swiftshader",
                                                                     "--enable-unsafe-swiftshader"]
    monkeypatch.setattr(browser_test, "FLAGS", flags)
    chromium = browser_test.DevTools(tmp_path / "profile")
    panes: list[dict] = []
    try:
        chromium.open(url, 1600, 900)
        for _ in range(600):  # until both graphs are laid out and their node panels filled
            panes = json.loads(chromium.evaluate(PANES_JS))
            if len(panes) == 2 and all(label in pane and "id" in pane for pane in panes):
                break
            time.sleep(0.5)
        screenshot.write_bytes(base64.b64decode(chromium.send("Page.captureScreenshot", format="png")["data"]))
    finally:
        chromium.close()
    return panes


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium; .ci/run does)")
@pytest.mark.parametrize("model", ["small", pytest.param("resnet18", marks=pytest.mark.nightly)])
def test_planted_fault_is_red_with_its_value_on_both_graphs_in_model_explorer(model, small_case, tmp_path, server,
                                                                              monkeypatch):
    """CI runs the small model (conv + folded BatchNorm + relu + linear, ~15 s); the nightly tier
    resnet18, the zoo case (~2 min on 2 shared cores: export, verify, and SwiftShader drawing 250
    nodes)."""
    if model == "small":
        report, entry, case = small_case
        fault, onnx_op, torch_op = "relu", "Sigmoid", "aten.relu"
    else:
        report = tmp_path / "report"
        (entry, case), fault, onnx_op, torch_op = _resnet18_planted(report), "relu_3", "Sigmoid", "aten.relu"
    assert [row["fx_node"] for row in case["verification"]["ops"] if row["passed"] is False] == [fault]
    (link,) = me.failing_links({**case, "model_explorer": entry}, report)
    url = link["url"].replace(f":{STYLE.server_port}/", f":{server}/")
    screenshot = Path(os.environ.get("ROUNDTRIP_MODEL_EXPLORER_SCREENSHOT") or tmp_path / "model_explorer.png")
    label = f"{case['name']}: x-allowed"

    panes = _open_in_chromium(url, label, tmp_path, screenshot, monkeypatch)

    assert len(panes) == 2, panes
    results = json.loads((report / entry["node_data"]["onnx"]["x_allowed"]).read_text())[entry["onnx_graph"]]
    expected = results["results"][fault]["value"]
    onnx_pane, torch_pane = panes
    assert onnx_pane["id"][0] == fault and onnx_pane["op name"][0] == onnx_op, onnx_pane
    assert torch_pane["id"][0] == fault and torch_pane["op name"][0] == torch_op, torch_pane
    for pane in panes:
        value, colour = pane[label]
        assert float(value) == pytest.approx(expected, rel=1e-6) and expected > 1
        assert colour == _rgb(STYLE.colours["fail"]), pane
    assert screenshot.read_bytes().startswith(b"\x89PNG")
