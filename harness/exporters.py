"""The exporters a verification can hold to account: roundtrip, torch.onnx (dynamo), torchscript."""

from __future__ import annotations

import io
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import onnx
import torch

import exporter as roundtrip_exporter

logger = logging.getLogger(__name__)


@dataclass
class ExportedForVerification:
    """The ONNX model under test and the FX program whose node values torch provides."""

    model: onnx.ModelProto
    program: torch.export.ExportedProgram
    exporter: str


def export_for_verification(
    exporter: str,
    model: torch.nn.Module,
    args: tuple[Any, ...],
    *,
    onnx_model: onnx.ModelProto | str | os.PathLike | None = None,
    opset_version: int | None = None,
    dynamic_axes: Mapping[str, Mapping[int, str]] | None = None,
    input_names: Sequence[str] | None = None,
) -> ExportedForVerification:
    if onnx_model is not None or exporter in ("roundtrip", "torchscript"):
        ours = roundtrip_exporter.export_program(
            model, args, opset_version=opset_version, dynamic_axes=dynamic_axes, input_names=input_names
        )
        if onnx_model is not None:
            proto = onnx_model if isinstance(onnx_model, onnx.ModelProto) else onnx.load(os.fspath(onnx_model))
            return ExportedForVerification(proto, ours.program, "given")
        if exporter == "roundtrip":
            return ExportedForVerification(ours.model, ours.program, exporter)
        return ExportedForVerification(_torchscript(model, args, opset_version, dynamic_axes, input_names),
                                       ours.program, exporter)
    if exporter == "torch.onnx":
        program = torch_onnx_export(model, args, opset_version=opset_version, dynamic_axes=dynamic_axes,
                                    input_names=input_names)
        return ExportedForVerification(program.model_proto, program.exported_program, exporter)
    raise ValueError(f"unknown exporter {exporter!r}")


def torch_onnx_export(model, args, *, opset_version=None, dynamic_axes=None, input_names=None,
                      optimize: bool = False):
    """torch.onnx's dynamo exporter. `optimize=False` keeps FX node names on the values, which
    is what lets the harness join its intermediates to torch's."""
    model.eval()
    kwargs: dict[str, Any] = {"dynamo": True, "optimize": optimize, "verbose": False}
    if opset_version is not None:
        kwargs["opset_version"] = opset_version
    if dynamic_axes:
        kwargs["dynamic_axes"] = dict(dynamic_axes)
        kwargs["input_names"] = list(input_names or dynamic_axes.keys())
    elif input_names:
        kwargs["input_names"] = list(input_names)
    return torch.onnx.export(model, args, **kwargs)


def _torchscript(model, args, opset_version, dynamic_axes, input_names) -> onnx.ModelProto:
    model.eval()
    buffer = io.BytesIO()
    torch.onnx.export(
        model, args, buffer, dynamo=False, opset_version=opset_version or 18,
        dynamic_axes=dict(dynamic_axes) if dynamic_axes else None,
        input_names=list(input_names) if input_names else None,
    )
    return onnx.load_from_string(buffer.getvalue())
