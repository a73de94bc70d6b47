"""The comparison with onnxscript's torch_lib is measured, current and honest.

docs/torchlib_gap.json (rendered into docs/OPERATORS.md) must be what tools/torchlib_gap.py
measures now; every overload of the gap has a category and a reason, and one that fails to
export today is never given another category.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("torchlib_gap", ROOT / "tools" / "torchlib_gap.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    return _tool()


def test_recorded_gap_is_current(tool) -> None:
    recorded = tool.OUTPUT.read_text() if tool.OUTPUT.exists() else ""
    assert recorded == tool.render_json(tool.measure()), "docs/torchlib_gap.json is stale: run python tools/torchlib_gap.py"


def test_gap_is_torchlib_minus_ours(tool) -> None:
    data = tool.measure(torchlib=["aten.add.Tensor", "aten.log1p.default", "aten.greater.Tensor", "aten.topk.default"],
                        ours=["aten.add.Tensor", "aten.relu.default"])
    assert [item["target"] for item in data["gap"]] == ["aten.greater.Tensor", "aten.log1p.default", "aten.topk.default"]
    assert data["both"] == 1 and data["ours_only"] == ["aten.relu.default"]
    categories = {item["target"]: item["category"] for item in data["gap"]}
    # greater.Tensor is CompositeImplicitAutograd; log1p is a core op nothing decomposes
    assert categories == {"aten.greater.Tensor": "decomposed at capture", "aten.log1p.default": "not yet translated",
                          "aten.topk.default": "not yet translated"}


def test_every_gap_entry_has_a_reason(tool) -> None:
    import json

    data = json.loads(tool.OUTPUT.read_text())
    for item in data["gap"]:
        assert item["category"] and item["reason"].startswith(item["category"]), item


def test_ops_whose_result_is_a_python_value_of_the_data_are_not_capturable(tool) -> None:
    """allclose/equal answer a Python bool of the values: the tool says torch.export cannot hold
    them, and torch.export indeed refuses a module that calls one; `.item()`, which torch.export
    captures as an unbacked symbol, is not put in that category."""
    import torch

    table = {str(op) for op in torch.export.default_decompositions()}
    for target in ("aten.allclose.default", "aten.equal.default"):
        assert tool.classify(target, table)[0] == "not capturable"
    assert tool.classify("aten._local_scalar_dense.default", table)[0] == "not yet translated"

    class Close(torch.nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return x + float(torch.allclose(x, y))

    with pytest.raises(Exception, match="allclose"):
        torch.export.export(Close(), (torch.zeros(2), torch.zeros(2)), strict=False)
