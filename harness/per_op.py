"""Per-op analysis beyond accumulated error: isolated error, fp64 truth and attribution."""

from __future__ import annotations

from typing import Any

import onnx
import torch

from harness.backend import DeviceSpec
from harness.mapping import NodeGroup
from harness.records import Verification
from harness.tolerances import ToleranceTable


def analyse(
    verification: Verification,
    onnx_proto: onnx.ModelProto,
    groups: dict[str, NodeGroup],
    program: torch.export.ExportedProgram,
    values: dict[str, Any],
    args: tuple[Any, ...],
    spec: DeviceSpec,
    table: ToleranceTable,
    tf32: bool,
) -> None:
    """Fill each OpRecord's isolated/truth fields (in place)."""
    return None
