"""The round-trip spine end to end on AlexNet and ResNet-18 (seeded random weights)."""

from __future__ import annotations

import io
import operator
import re

import onnx
import pytest
import torch
import torchvision

import exporter
import harness
from harness.runtime import BackendUnavailableError, cuda_unavailable_reason, prepare
from harness.analysis.fx_mapping import compute_nodes

# fp32 end-to-end tolerance per net on onnxruntime CPU, scaled to its logits: measured max abs
# error (batches 2 and 3, these seeds) is 2.7e-8 for AlexNet (|logits| <= 3e-2) and 3.8e-6 for
# ResNet-18 (|logits| <= 6). atol is ~40x (AlexNet) and ~25x (ResNet) the measured error, so a
# divergence of 1e-4 of the logit scale fails either; rtol 1e-3 on top (near-zero logits make
# the relative error alone meaningless: measured max rel 2e-3).
OUTPUT_TOLERANCES = {"alexnet": (1e-6, 1e-3), "resnet18": (1e-4, 1e-3)}

MODELS = {
    "alexnet": lambda: torchvision.models.alexnet(),
    "resnet18": lambda: torchvision.models.resnet18(),
}


@pytest.fixture(scope="module", params=sorted(MODELS))
def case(request):
    torch.manual_seed(0)
    model = MODELS[request.param]().eval()
    args = (torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(1)),)
    # one node per op (optimize=False): the spine's contract that every FX value keeps its name
    result = exporter.export_program(model, args, dynamic_axes={"x": {0: "batch"}}, optimize=False)
    return request.param, model, args, result


def test_checker_passes(case):
    _, _, _, result = case
    onnx.checker.check_model(result.model, full_check=True)
    assert result.model.ir_version <= 13
    assert result.model.opset_import[0].version == exporter.DEFAULT_OPSET


@pytest.mark.parametrize("batch", [2, 3])
def test_onnxruntime_cpu_matches_torch(case, batch):
    name, model, _, result = case
    x = torch.randn(batch, 3, 224, 224, generator=torch.Generator().manual_seed(batch))
    (actual,) = prepare(result.model, device="CPU").run(x.numpy())
    with torch.no_grad():
        expected = model(x).numpy()
    atol, rtol = OUTPUT_TOLERANCES[name]
    comparison = harness.compare(actual, expected, atol=atol, rtol=rtol)
    assert comparison.passed, comparison.to_dict()


def test_value_names_are_fx_node_names(case):
    _, _, _, result = case
    produced = {out for node in result.model.graph.node for out in node.output}
    for fx_node in compute_nodes(result.program):
        val = fx_node.meta.get("val")
        if isinstance(val, torch.Tensor):
            assert fx_node.name in produced, f"no ONNX value named {fx_node.name}"


def test_every_node_carries_provenance(case):
    name, _, _, result = case
    root = {"alexnet": "AlexNet", "resnet18": "ResNet"}[name]
    fx_names = {n.name for n in result.program.graph.nodes}
    for node in result.model.graph.node:
        meta = {p.key: p.value for p in node.metadata_props}
        assert set(meta) >= {"roundtrip.fx_node", "roundtrip.aten", "roundtrip.scope", "roundtrip.source"}
        assert meta["roundtrip.fx_node"] in fx_names
        assert meta["roundtrip.scope"].startswith(root)
        assert meta["roundtrip.aten"].startswith("aten.")
    convs = [n for n in result.model.graph.node if n.op_type == "Conv"]
    first = {p.key: p.value for p in convs[0].metadata_props}
    expected_scope = {"alexnet": "AlexNet/Sequential[features]/Conv2d[0]", "resnet18": "ResNet/Conv2d[conv1]"}[name]
    assert first["roundtrip.scope"] == expected_scope
    assert re.fullmatch(rf"torchvision/models/{name[:6]}[a-z]*\.py:\d+", first["roundtrip.source"])


def test_verify_per_op_table(case):
    name, model, args, _ = case
    atol, rtol = OUTPUT_TOLERANCES[name]
    verification = harness.verify(model, args, output_atol=atol, output_rtol=rtol, optimize=False)
    assert verification.checker.passed
    assert verification.passed, [c.to_dict() for c in verification.outputs]
    program = exporter.export_program(model, args, optimize=False).program
    tensor_nodes = {
        n.name for n in compute_nodes(program)
        if isinstance(n.meta.get("val"), torch.Tensor)
        or (isinstance(n.meta.get("val"), tuple) and isinstance(n.meta["val"][0], torch.Tensor))
    }
    rows = {op.fx_node: op for op in verification.ops}
    assert tensor_nodes <= set(rows)
    for fx_name in tensor_nodes:
        row = rows[fx_name]
        assert row.onnx_ops, f"{fx_name} has no ONNX ops"
        assert row.scope and row.source, f"{fx_name} lacks scope or source"
        assert row.accumulated is not None and row.accumulated.shape_match
    worst = verification.worst_op
    assert worst is not None and worst.fx_node in rows
    data = verification.to_dict()
    assert data["worst_op"] == worst.fx_node and len(data["ops"]) == len(verification.ops)


def test_verbose_prints_scopes(capsys):
    torch.manual_seed(0)
    model = torchvision.models.alexnet().eval()
    exporter.export(model, (torch.randn(1, 3, 224, 224),), verbose=True)
    printed = capsys.readouterr().out
    assert "Conv[" in printed
    assert "scope: AlexNet/Sequential[features]/Conv2d[0]" in printed
    assert "scope: AlexNet/Sequential[classifier]/Linear[6]" in printed


def test_export_writes_path_and_file_object(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
    args = (torch.randn(2, 4),)
    path = tmp_path / "nested" / "model.onnx"
    returned = exporter.export(model, args, path, input_names=["features"], output_names=["scores"])
    assert onnx.load(path) == returned
    buffer = io.BytesIO()
    exporter.export(model, args, buffer)
    assert onnx.load_from_string(buffer.getvalue()).graph.node
    assert [i.name for i in returned.graph.input] == ["features"]
    assert [o.name for o in returned.graph.output] == ["scores"]
    assert not list(tmp_path.glob("nested/.*part"))


@pytest.mark.parametrize("opset", [16, 27])
def test_unsupported_opset_is_refused(opset):
    with pytest.raises(exporter.ExportError, match=f"opset_version={opset} is outside"):
        exporter.export(torch.nn.ReLU(), (torch.randn(2),), opset_version=opset)


@torch.library.custom_op("roundtrip_test::mystery", mutates_args=())
def _mystery(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@_mystery.register_fake
def _(x):
    return torch.empty_like(x)


class _Inner(torch.nn.Module):
    def forward(self, x):
        return _mystery(x) + 1


class _Unsupported(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = _Inner()

    def forward(self, x):
        return self.block(torch.relu(x))


def test_unsupported_operator_error_names_scope_and_source():
    with pytest.raises(exporter.UnsupportedOperatorError) as raised:
        exporter.export(_Unsupported(), (torch.randn(3),))
    error = raised.value
    assert [op.target for op in error.operators] == ["roundtrip_test.mystery.default"]
    op = error.operators[0]
    assert op.scope == "_Unsupported/_Inner[block]"
    assert op.source.endswith(f"test_spine.py:{_Inner.forward.__code__.co_firstlineno + 1}")
    assert "roundtrip_test.mystery.default" in str(error) and "register_symbolic" in str(error)


@pytest.mark.skipif(cuda_unavailable_reason() is None, reason="a usable CUDA GPU is present")
def test_cuda_backend_refuses_clearly_without_gpu():
    model = exporter.export(torch.nn.ReLU(), (torch.randn(2),))
    with pytest.raises(BackendUnavailableError, match="CUDA was requested but cannot be used"):
        prepare(model, device="CUDA:0")


def test_getitem_is_an_alias_not_an_op():
    model = torchvision.models.resnet18().eval()
    result = exporter.export_program(model, (torch.randn(1, 3, 64, 64),))
    getitems = [n for n in result.program.graph.nodes if n.target is operator.getitem]
    fx_of_nodes = {p.value for node in result.model.graph.node for p in node.metadata_props
                   if p.key == "roundtrip.fx_node"}
    assert getitems and not fx_of_nodes & {n.name for n in getitems}
