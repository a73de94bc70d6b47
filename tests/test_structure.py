"""Structural rules that are not layering: the opset has one owner, file names have one
sanitiser."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest
import torch

import exporter
from exporter.translate import registry
from exporter.contract.fileio import safe_filename

ROOT = Path(__file__).resolve().parent.parent
_FILENAME_ALPHABET = re.compile(r"A-Za-z0-9_\.-|isalnum\(\) or \w+ in '-_\.'")


class _Tiny(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.relu()


def test_capture_does_not_take_an_opset() -> None:
    assert "opset_version" not in inspect.signature(exporter.capture).parameters


@pytest.mark.parametrize("default", [17, 26])
def test_convert_reads_the_default_opset_from_the_registry(monkeypatch, default) -> None:
    """A program captured before the default changes converts at the registry's default: the
    opset is not recorded by the capture and read back."""
    program = exporter.capture(_Tiny(), (torch.randn(2),))
    monkeypatch.setattr(registry, "DEFAULT_OPSET", default)
    model = exporter.convert(program)
    assert [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")] == [default]
    assert [o.version for o in exporter.convert(program, opset_version=17).opset_import if o.domain == ""] == [17]


@pytest.mark.parametrize(("name", "expected"), [
    ("tests/test_x.py::test_y[a-b]", "tests_test_x.py_test_y_a-b"),
    ("../../etc/passwd", "etc_passwd"),
    ("conv2d_3", "conv2d_3"),
    ("...", "unnamed"),
    (".hidden", "hidden"),
    ("résumé op", "r_sum_op"),
    ("x" * 300, "x" * 120),
])
def test_safe_filename(name: str, expected: str) -> None:
    assert safe_filename(name) == expected


def test_one_filename_sanitiser() -> None:
    """No module but exporter/contract/fileio.py writes its own: a function that maps a name onto the
    file-name alphabet (letters, digits, "-", "_", ".") with a regex or a per-character filter.
    (HTML anchors and Python identifiers have other alphabets and other rules.)"""
    own = []
    for folder in ("harness", "exporter", "op_table", "model_zoo_cases", "tools", "bench"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == ROOT / "exporter" / "contract" / "fileio.py":
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef) and _FILENAME_ALPHABET.search(ast.unparse(node)):
                    own.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert not own, f"file-name sanitisers besides exporter.contract.fileio.safe_filename: {own}"
