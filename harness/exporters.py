"""The exporters a verification can hold to account: roundtrip, torch.onnx (dynamo), torchscript.

Each export comes with the FX program whose node values torch provides, when there is one:

* roundtrip: `exporter.export_program`'s program; ONNX values are named after its FX nodes.
* torch.onnx: the ONNXProgram's own `exported_program`, exported with `optimize=False` so that
  every FX value keeps its name in the ONNX graph (the optimizer fuses values away).
* torchscript: no FX program: the harness compares outputs with the eager module and
  verifies per ONNX node against onnx's ReferenceEvaluator.

A given `onnx_model` is paired with the program of the exporter that made it (`exporter=`),
so its value names join; without one (or when capture fails) it is verified per ONNX node.
"""

from __future__ import annotations

import io
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import onnx
import torch

from exporter.contract.keys import OPTIMIZED_KEY
from harness.runtime.model_files import load_model_file

logger = logging.getLogger(__name__)

EXPORTERS = ("roundtrip", "torch.onnx", "torchscript")


@dataclass
class ExportedForVerification:
    """The ONNX model under test and the FX program whose node values torch provides."""

    model: onnx.ModelProto
    program: torch.export.ExportedProgram | None
    exporter: str
    notes: list[str] = field(default_factory=list)
    # The arrays of the model's in-memory initializers (roundtrip's skeleton: views of the
    # module's parameters, never copied into the proto); None when the model holds its weights.
    weights: Mapping[str, Any] | None = None


def export_for_verification(
    exporter: str,
    model: torch.nn.Module,
    args: tuple[Any, ...],
    *,
    kwargs: Mapping[str, Any] | None = None,
    onnx_model: onnx.ModelProto | str | os.PathLike | None = None,
    opset_version: int | None = None,
    dynamic_axes: Mapping[str, Mapping[int, str]] | None = None,
    input_names: Sequence[str] | None = None,
    optimize: bool = True,
) -> ExportedForVerification:
    """Export `model` on `args` and `kwargs` with `exporter` (or take `onnx_model`, made by
    `exporter`). Every exporter captures the module in eval mode and leaves it in the mode it
    was found in."""
    if exporter not in EXPORTERS:
        raise ValueError(f"exporter={exporter!r}; choose one of {EXPORTERS}")
    given = None
    if onnx_model is not None:
        given = onnx_model if isinstance(onnx_model, onnx.ModelProto) else load_model_file(onnx_model)
    options = dict(kwargs=dict(kwargs) if kwargs else None, opset_version=opset_version,
                   dynamic_axes=dynamic_axes, input_names=input_names)
    if exporter == "roundtrip":
        import exporter as roundtrip_exporter

        if given is None:  # optimize=False: one node per op (roundtrip run --no-optimize)
            ours = roundtrip_exporter.export_program(model, args, **options, optimize=optimize)
            return ExportedForVerification(ours.skeleton, ours.program, exporter, weights=ours.weights)
        try:  # in the form the given model was exported in, so that its weights are the same
            optimize = {"true": True, "false": False}.get(_metadata(given).get(OPTIMIZED_KEY, ""), optimize)
            again = roundtrip_exporter.export_program(model, args, **options, optimize=optimize)
            program = again.program
        except roundtrip_exporter.ExportError as error:
            return ExportedForVerification(given, None, "given", [
                f"roundtrip could not capture the module ({type(error).__name__}), so the given model "
                "is verified per ONNX node against onnx's ReferenceEvaluator"
            ])
        notes = []
        if given.producer_name not in ("", "roundtrip"):
            notes.append(
                f"the given model was produced by {given.producer_name!r} but is joined to roundtrip's FX "
                "program; pass exporter='torch.onnx' (or 'torchscript') to pair it with its own exporter"
            )
        # a skeleton given back (Verification.onnx_model) takes its weights from this module
        return ExportedForVerification(given, program, "given", notes, weights=again.weights)
    if exporter == "torch.onnx":
        try:
            program = torch_onnx_export(model, args, **options)
        except torch.onnx.OnnxExporterError as error:  # e.g. these inputs conflict with its dynamic axes
            if given is None:
                raise
            return ExportedForVerification(given, None, "given", [
                f"torch.onnx could not capture the module with these inputs ({type(error).__name__}), so the "
                "given model is verified per ONNX node against onnx's ReferenceEvaluator"
            ])
        if given is None:
            return ExportedForVerification(program.model_proto, program.exported_program, exporter)
        return ExportedForVerification(given, program.exported_program, "given")  # its FX program, the given model
    if given is None:
        given = torchscript_export(model, args, **options)
        return ExportedForVerification(given, None, exporter)
    return ExportedForVerification(given, None, "given")


def _metadata(model: onnx.ModelProto) -> dict[str, str]:
    return {entry.key: entry.value for entry in model.metadata_props}


def torch_onnx_export(model, args, *, kwargs=None, opset_version=None, dynamic_axes=None, input_names=None,
                      optimize: bool = False):
    """torch.onnx's dynamo exporter, run with the module in eval mode (then restored).
    `optimize=False` keeps FX node names on the values, which is what lets the harness join its
    intermediates to torch's."""
    options: dict[str, Any] = {"dynamo": True, "optimize": optimize, "verbose": False, "kwargs": kwargs}
    if opset_version is not None:
        options["opset_version"] = opset_version
    if dynamic_axes:
        options["dynamic_axes"] = dict(dynamic_axes)
        options["input_names"] = list(input_names or dynamic_axes.keys())
    elif input_names:
        options["input_names"] = list(input_names)
    from exporter.capturing.trace import eval_mode

    with eval_mode(model):
        return torch.onnx.export(model, args, **options)


def torchscript_export(model, args, *, kwargs=None, opset_version=None, dynamic_axes=None,
                       input_names=None) -> onnx.ModelProto:
    """torch.onnx's TorchScript-based exporter (`dynamo=False`), run with the module in eval
    mode (then restored)."""
    from exporter.capturing.trace import eval_mode
    from exporter.translate.registry import DEFAULT_OPSET

    buffer = io.BytesIO()
    with eval_mode(model):
        torch.onnx.export(
            model, args, buffer, kwargs=kwargs, dynamo=False, opset_version=opset_version or DEFAULT_OPSET,
            dynamic_axes=dict(dynamic_axes) if dynamic_axes else None,
            input_names=list(input_names) if input_names else None,
        )
    return onnx.load_from_string(buffer.getvalue())
