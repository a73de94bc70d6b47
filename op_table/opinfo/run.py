"""One OpInfo sample through the exporter: captured alone, exported, run on onnxruntime's CPU
provider (bfloat16 on `onnx.reference` where onnxruntime has no kernel) and judged against torch
and the fp64 truth (op_table.opinfo.judge)."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
import torch
import torch.utils._pytree as pytree

import exporter
from exporter.translate.registry import DEFAULT_OPSET
from op_table.opinfo.forms import DirectCall
from op_table.opinfo.judge import judge_output, nearest_outputs, program_facts, sample_truth, special_outputs

OPSET = DEFAULT_OPSET
# onnxruntime's error for an op it has no kernel for in a dtype
_NO_KERNEL = re.compile(r"Could not find an implementation for (\w+)\((\d+)\)")


class _Call(torch.nn.Module):
    """An OpInfo sample as a module: its tensors are the inputs, everything else is fixed."""

    def __init__(self, fn: Any, spec: pytree.TreeSpec, leaves: list[Any]) -> None:
        super().__init__()
        self.fn, self.spec, self.leaves = fn, spec, leaves
        # a ModuleInfo sample's module (a leaf) is registered, so its weights are the program's
        self.sample_modules = torch.nn.ModuleList([leaf for leaf in leaves if isinstance(leaf, torch.nn.Module)])

    def forward(self, *tensors: torch.Tensor) -> Any:
        supply = iter(tensors)
        leaves = [next(supply) if isinstance(leaf, torch.Tensor) else leaf for leaf in self.leaves]
        sample_input, args, kwargs = pytree.tree_unflatten(leaves, self.spec)
        return self.fn(sample_input, *args, **kwargs)


@dataclass
class Outcome:
    """One sample: the overloads it exercised, and whether it passed (else why not)."""

    targets: list[str]
    passed: bool
    reason: str = ""


def _detached(value: Any) -> Any:
    return pytree.tree_map_only(torch.Tensor, lambda t: t.detach().clone(), value)


def _outputs(value: Any) -> list[torch.Tensor] | None:
    leaves = pytree.tree_leaves(value)
    if not leaves or not all(isinstance(leaf, torch.Tensor) for leaf in leaves):
        return None
    return leaves


def run_sample(entry: Any, sample: Any, claimed: set[str], call: DirectCall | None = None,
               tolerance: tuple[float, float] | None = None) -> Outcome | None:
    """Export one sample and judge it against torch and its fp64 truth (op_table.opinfo.judge);
    None when the sample is not one for `claimed` (its program holds none of them) or returns no
    tensors. With `call`, the sample goes through that kernel form instead of the entry's own op
    (None if it does not fit). `tolerance`: the (rtol, atol) of a bounded expectation, which
    overrides the verdict rule for its float outputs."""
    from op_table.table import program_targets

    op, sample_input, args, kwargs = entry.op, sample.input, tuple(sample.args), dict(sample.kwargs)
    if call is not None:
        adapted = call.adapt(sample_input, args, kwargs)
        if adapted is None:
            return None
        op, sample_input, args, kwargs = adapted
    leaves, spec = pytree.tree_flatten(_detached((sample_input, args, kwargs)))
    module = _Call(op, spec, leaves)
    tensors = [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]
    try:
        with torch.no_grad():
            expected = _outputs(module(*[t.clone() for t in tensors]))
    except Exception:  # the sample errors in torch itself (an error-input sample)
        return None
    if expected is None:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = exporter.capture(module, tuple(tensors))
    except Exception:  # torch.export cannot capture it: not the registry's to answer
        return None
    exercised = sorted(program_targets(program) & claimed)
    if not exercised:
        return None
    try:
        model = exporter.convert(program, opset_version=OPSET)
    except Exception as error:
        return Outcome(exercised, False, f"export: {recorded_message(error)}")
    try:
        got, backend = run_model(model, tensors)
    except Exception as error:
        return Outcome(exercised, False, f"onnxruntime: {recorded_message(error)}")
    if len(got) != len(expected):
        return Outcome(exercised, False, f"{len(got)} outputs, torch has {len(expected)}")
    facts = program_facts(program)
    special = special_outputs(program, tensors)
    settlers = nearest_outputs(program, tensors)
    floating = any(want.dtype.is_floating_point or want.dtype.is_complex
                   for index, want in enumerate(expected) if index not in special)
    truth = sample_truth(module, tensors, facts) if floating and tolerance is None else None
    if truth is not None and len(truth) != len(expected):
        truth = None
    for index, (actual, want) in enumerate(zip(got, expected)):
        if index in special:  # a draw, values torch leaves undefined, an op's indices
            problem = special[index](actual, want)
        else:
            truth_of = truth[index] if truth is not None else None
            if index in settlers:  # a nearest grid sample: its picks on .5 ties settled first
                actual, want = settlers[index](actual, want, truth_of)
            problem = judge_output(actual, want, truth_of, targets=exercised, facts=facts, tolerance=tolerance)
        if problem:
            return Outcome(exercised, False, f"{backend}output {index}: {problem}")
    return Outcome(exercised, True, backend.rstrip(": "))


_REPOSITORY = str(Path(__file__).resolve().parents[2]) + "/"


def recorded_message(error: BaseException, limit: int = 300) -> str:
    """An error's message as the record keeps it: on one line, at most `limit` characters, the
    repository's files named by their path inside it (the record is the same on every checkout)."""
    return " ".join(str(error).replace(_REPOSITORY, "").split())[:limit]


def run_model(model: Any, tensors: Sequence[torch.Tensor]) -> tuple[list[np.ndarray], str]:
    """The model's outputs on onnxruntime's CPU provider, and "" (the backend note).

    numpy has no bfloat16, so a bfloat16 model is fed OrtValues and its bfloat16 outputs are
    cast to float32 inside the graph (exact). onnxruntime's CPU provider has bfloat16 kernels
    for almost no operator (not even Add); where it has none, the model runs on
    `onnx.reference` (ml_dtypes bfloat16 arithmetic) and the note says so."""
    from exporter.translate.dtypes import to_numpy
    from harness.backend import prepare

    arrays = [to_numpy(t) for t in tensors]
    bfloat16 = onnx.TensorProto.BFLOAT16
    has_bfloat16 = any(t.dtype == torch.bfloat16 for t in tensors) or any(
        o.type.tensor_type.elem_type == bfloat16 for o in model.graph.output)
    if not has_bfloat16:
        return prepare(model, "CPU").run(arrays), ""
    try:
        return _run_bfloat16_on_onnxruntime(model, arrays), ""
    except Exception as error:
        missing = _NO_KERNEL.search(str(error))
        if missing is None:
            raise
    from onnx.reference import ReferenceEvaluator

    feeds = {i.name: a for i, a in zip(model.graph.input, arrays)}
    outputs = ReferenceEvaluator(model).run(None, feeds)
    note = f"onnx.reference (onnxruntime CPU has no bfloat16 kernel for {missing.group(1)}-{missing.group(2)}): "
    return [np.asarray(o) for o in outputs], note


def _run_bfloat16_on_onnxruntime(model: Any, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    graph_model = onnx.ModelProto()
    graph_model.CopyFrom(model)
    graph = graph_model.graph
    for output in graph.output:
        if output.type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16:
            widened = f"{output.name}__float32"
            graph.node.append(onnx.helper.make_node("Cast", [output.name], [widened], to=onnx.TensorProto.FLOAT))
            output.name = widened
            output.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    session = ort.InferenceSession(graph_model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {}
    for value, array in zip(graph.input, arrays):
        array = np.array(array, order="C", copy=True)  # (np.ascontiguousarray makes 0-d arrays 1-d)
        if value.type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16:
            feeds[value.name] = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
                array.view(np.uint16), onnx.TensorProto.BFLOAT16)
        else:
            feeds[value.name] = ort.OrtValue.ortvalue_from_numpy(array)
    return [value.numpy() for value in session.run_with_ort_values(None, feeds)]


