"""The operator table as a whole: collecting rows, building their samples, exporting them.

Shared by the runner (tests/test_ops.py), the meta-tests and tools/gen_op_table.py, so the
three agree on what a row exports.
"""

from __future__ import annotations

import importlib
import pkgutil
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import onnx
import torch

import exporter
from exporter.registry import BUILTINS, normalize_target

from .schema import OpCase

ATEN_KEY = "roundtrip.aten"


def all_cases() -> list[OpCase]:
    """Every row of every `cases_*.py` module next to this file, module by module."""
    package = importlib.import_module(__package__)
    cases: list[OpCase] = []
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if info.name.startswith("cases_"):
            cases += importlib.import_module(f"{__package__}.{info.name}").CASES
    return cases


def case_seed(case: OpCase) -> int:
    """The row's seed: stable across processes and runs (unlike hash())."""
    return zlib.crc32(case.name.encode())


@dataclass
class Sample:
    """A row's module and inputs, built from its seed."""

    module: torch.nn.Module
    args: tuple[Any, ...]
    seed: int

    @property
    def tensor_args(self) -> list[torch.Tensor]:
        """The ONNX model's inputs: Python scalars were specialised by torch.export."""
        return [a for a in self.args if isinstance(a, torch.Tensor)]


def build_sample(case: OpCase) -> Sample:
    """Module (built under torch's RNG seeded from the row) and inputs (from a seeded generator)."""
    seed = case_seed(case)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = case.module().eval()
    args = case.inputs(torch.Generator().manual_seed(seed))
    return Sample(module, tuple(args), seed)


def capture_case(case: OpCase, sample: Sample) -> torch.export.ExportedProgram:
    """The row's program: one capture serves every opset of the row."""
    return exporter.capture(sample.module, sample.args, dynamic_axes=case.dynamic_axes)


def convert_case(case: OpCase, program: torch.export.ExportedProgram, opset: int) -> exporter.ExportResult:
    """The row's program converted at `opset`."""
    return exporter.convert_program(program, opset_version=opset, dynamic_axes=case.dynamic_axes)

def provenance_targets(model: onnx.ModelProto) -> set[str]:
    """The ATen overloads named by the model's node provenance."""
    return {p.value for node in model.graph.node for p in node.metadata_props if p.key == ATEN_KEY}


def program_targets(program: torch.export.ExportedProgram) -> set[str]:
    return {normalize_target(n.target) for n in program.graph.nodes if n.op == "call_function"}


def emits_no_nodes(target: str) -> bool:
    """Whether the built-in symbolic for `target` translates to nothing (a proved check)."""
    return any(getattr(entry.fn, "emits_no_nodes", False) for entry in BUILTINS.entries(target))


def flat_tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in flat_tensors(item)]
    return []


def targets_of(cases: Iterable[OpCase]) -> set[str]:
    return {t for case in cases for t in case.targets}
