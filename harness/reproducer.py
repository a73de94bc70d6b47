"""Write a standalone reproducer of one op: its subgraph, its inputs and its expected outputs.

`write_reproducer(verification_or_op, directory)` writes `<directory>/<op>/`:

    model.onnx     the op's ONNX nodes alone (inputs keep their names; weights as initializers)
    inputs.npz     the reference's values for the subgraph's inputs (torch's, or onnx's
                   ReferenceEvaluator's for ONNX-node rows)
    expected.npz   the reference's values for its outputs
    run.py         re-runs model.onnx on onnxruntime and compares (numpy + onnxruntime only)
    README.md      what failed, where it came from, the seed and the command line

The folder is assembled under a temporary name and renamed into place, so a reader never sees
half a reproducer.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tempfile
from typing import Any

import numpy as np

from exporter.contract.fileio import safe_filename
from exporter.contract.keys import ATEN_KEY
from harness.onnxgraph.isolation import Subgraph, build
from harness.records import OpRecord, Verification

REPRODUCER_OF_KEY = "roundtrip.reproducer_of"
"""Model metadata of a reproducer: the op (FX node or ONNX node) it isolates."""

RUN_SCRIPT = '''"""Re-run this reproducer: python run.py [--device cpu|cuda]"""
import argparse
import os

import numpy as np
import onnxruntime as ort

here = os.path.dirname(os.path.abspath(__file__))
parser = argparse.ArgumentParser()
parser.add_argument("--device", default={device!r}, choices=["cpu", "cuda"])
options = parser.parse_args()
providers = ["CUDAExecutionProvider"] if options.device == "cuda" else ["CPUExecutionProvider"]
session = ort.InferenceSession(os.path.join(here, "model.onnx"), providers=providers)
inputs = dict(np.load(os.path.join(here, "inputs.npz")))
expected = dict(np.load(os.path.join(here, "expected.npz")))
names = [o.name for o in session.get_outputs()]
atol, rtol = {atol!r}, {rtol!r}
failed = False
for name, actual in zip(names, session.run(names, inputs)):
    want = expected[name]
    if actual.shape != want.shape:
        print(f"{{name}}: shape {{actual.shape}} != expected {{want.shape}}")
        failed = True
        continue
    error = np.abs(actual.astype(np.float64) - want.astype(np.float64))
    bound = atol + rtol * np.abs(want.astype(np.float64))
    nan_agree = np.isnan(actual) == np.isnan(want)
    ok = bool(np.all((error <= bound) | (np.isnan(error) & nan_agree)) and np.all(nan_agree))
    failed |= not ok
    print(f"{{name}}: max abs {{np.nanmax(error) if error.size else 0.0:.3g}} "
          f"(tolerance {{atol}} + {{rtol}}*|expected|): {{'ok' if ok else 'MISMATCH'}}")
raise SystemExit(1 if failed else 0)
'''


def write_reproducer(verification_or_op: Verification | OpRecord, directory: str | os.PathLike) -> str:
    """Write the reproducer of an op (a Verification's worst op by default); returns its folder."""
    op = verification_or_op.worst_op if isinstance(verification_or_op, Verification) else verification_or_op
    if op is None:
        raise ValueError("the verification has no per-op rows (was it run with per_op=False?)")
    artifacts = op.artifacts
    if artifacts is None:
        reason = op.not_isolable or "it was not isolated"
        raise ValueError(f"op {op.name!r} has no reproducer: {reason}")
    subgraph = Subgraph(op.name, list(artifacts.nodes), list(artifacts.expected))
    restore = artifacts.weights.restore_tensor if artifacts.weights is not None else (lambda t: t)
    built = build(artifacts.source, [subgraph], {op.name: artifacts.inputs}, restore, rename_inputs=False)
    model = built.model
    model.graph.name = safe_filename(op.name, "op")
    _type_outputs(model, artifacts.expected)
    for key, value in ((REPRODUCER_OF_KEY, op.name), (ATEN_KEY, op.aten)):
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value

    parent = os.fspath(directory)
    os.makedirs(parent, exist_ok=True)
    final = os.path.join(parent, safe_filename(op.name, "op"))
    staging = tempfile.mkdtemp(prefix=f".{safe_filename(op.name, 'op')}-", dir=parent)
    try:
        with open(os.path.join(staging, "model.onnx"), "wb") as handle:
            handle.write(model.SerializeToString())
        _save_npz(os.path.join(staging, "inputs.npz"), built.feeds)
        _save_npz(os.path.join(staging, "expected.npz"), artifacts.expected)
        tolerance = artifacts.tolerance
        with open(os.path.join(staging, "run.py"), "w") as handle:
            handle.write(RUN_SCRIPT.format(device="cuda" if artifacts.device == "cuda" else "cpu",
                                           atol=tolerance.get("atol", 0.0), rtol=tolerance.get("rtol", 0.0)))
        with open(os.path.join(staging, "README.md"), "w") as handle:
            handle.write(_readme(op, artifacts))
        _replace_directory(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return final


def _type_outputs(model, expected: dict[str, np.ndarray]) -> None:
    from onnx import helper

    del model.graph.output[:]
    for name, value in expected.items():
        model.graph.output.append(helper.make_tensor_value_info(
            name, helper.np_dtype_to_tensor_dtype(np.asarray(value).dtype), list(np.shape(value))))


def _save_npz(path: str, arrays: dict[str, Any]) -> None:
    buffer = io.BytesIO()
    np.savez(buffer, **{name: np.asarray(value) for name, value in arrays.items()})
    with open(path, "wb") as handle:
        handle.write(buffer.getvalue())


def _replace_directory(staging: str, final: str) -> None:
    """Move `staging` to `final`; an older reproducer there is swapped out, then removed."""
    if os.path.exists(final):
        old = tempfile.mkdtemp(prefix=".old-", dir=os.path.dirname(final))
        os.rmdir(old)
        os.rename(final, old)
        os.rename(staging, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(staging, final)



def _readme(op: OpRecord, artifacts) -> str:
    isolated = op.isolated.to_dict() if op.isolated else None
    environment = artifacts.environment or {}
    seed = environment.get("torch_seed")
    lines = [
        f"# Reproducer: {op.name} ({op.aten})",
        "",
        f"- ONNX nodes: {', '.join(f'{n} ({t})' for n, t in zip(op.onnx_nodes, op.onnx_ops))}",
        f"- scope: {op.scope or '-'}",
        f"- source: {op.source or '-'}",
        f"- device: {artifacts.device}; expected values from: {artifacts.reference}",
        f"- tolerance: atol={artifacts.tolerance.get('atol')} rtol={artifacts.tolerance.get('rtol')}"
        f" ({artifacts.tolerance.get('source', '')})",
        f"- verdict: {'passed' if op.passed else 'FAILED' if op.passed is False else 'unknown'}; "
        f"attribution vs fp64 truth: {op.attribution or '-'}",
        f"- seed: torch.initial_seed() was {seed} when the verification ran; the inputs below are "
        "the exact values, so re-running needs no seed",
        "",
        "## Re-run",
        "",
        "```",
        f"python run.py{' --device cuda' if artifacts.device == 'cuda' else ''}",
        "```",
        "",
        "`inputs.npz` holds the subgraph's inputs by name, `expected.npz` the expected outputs.",
        "",
        "## Isolated comparison when the reproducer was written",
        "",
        "```json",
        json.dumps(isolated, indent=1),
        "```",
        "",
        "## Versions",
        "",
        "```json",
        json.dumps({k: v for k, v in environment.items() if k != "noise_model"}, indent=1, default=str),
        "```",
        "",
    ]
    return "\n".join(lines)
