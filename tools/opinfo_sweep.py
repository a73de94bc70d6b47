"""Run PyTorch's OpInfo samples against every ATen overload the registry claims; record the
results in docs/opinfo.json (tools/gen_op_table.py turns them into a column of OPERATORS.md).

For each registered overload, the candidate OpInfo entries of
`torch.testing._internal.common_methods_invocations.op_db` are those named after it (its ATen
name, or `nn.functional.<name>`, or an alias below). Each sample of a candidate, in float32 and
in float16, bfloat16 and int64 where the entry supports them, is captured alone; it counts for
the overload when the captured program holds that overload (a sample that torch routes to
another overload counts for that one, if it is registered and the entry is its candidate).
The sample is exported (opset `OPSET`), run on onnxruntime's CPU provider and compared with
torch: same dtype and shape, equal integers and bools, floats within the dtype's tolerance.

    python tools/opinfo_sweep.py                    # every overload, resumable, writes the JSON
    python tools/opinfo_sweep.py --only 'aten.add.*' --max-samples 4
    python tools/opinfo_sweep.py --write-xfails     # tests/opinfo_xfails.json from the failures

tests/test_opinfo.py runs the same samples live and holds every failure to that table: one
entry per OpInfo entry, dtype and sample index, with its reason.
"""

from __future__ import annotations

import argparse
import fnmatch
import functools
import json
import logging
import re
import sys
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.utils._pytree as pytree

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import exporter  # noqa: E402
from exporter.fileio import write_text_atomic  # noqa: E402
from exporter.registry import BUILTINS, normalize_target  # noqa: E402

RESULTS = ROOT / "docs" / "opinfo.json"
OPSET = 18
DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int64)
MAX_SAMPLES = 12  # per entry and dtype: OpInfo lists up to ~50; the first ones are the varied ones
# (atol, rtol) per dtype: float32 as the op table; the half types at their precision
TOLERANCES = {torch.float32: (1e-5, 1e-4), torch.float16: (1e-3, 1e-2), torch.bfloat16: (1e-2, 2e-2)}

# OpInfo names for overloads whose own name is not an OpInfo entry's.
ALIASES: dict[str, tuple[str, ...]] = {
    "_adaptive_avg_pool2d": ("nn.functional.adaptive_avg_pool2d",),
    "_adaptive_avg_pool3d": ("nn.functional.adaptive_avg_pool3d",),
    "_log_softmax": ("log_softmax",),
    "_softmax": ("softmax",),
    "_native_batch_norm_legit_no_training": ("nn.functional.batch_norm",),
    "_native_batch_norm_legit": ("nn.functional.batch_norm",),
    "_pad_circular": ("nn.functional.pad",),
    "reflection_pad1d": ("nn.functional.pad",), "reflection_pad2d": ("nn.functional.pad",),
    "reflection_pad3d": ("nn.functional.pad",), "replication_pad1d": ("nn.functional.pad",),
    "replication_pad2d": ("nn.functional.pad",), "replication_pad3d": ("nn.functional.pad",),
    "constant_pad_nd": ("nn.functional.pad",),
    "_to_copy": ("to",), "_unsafe_view": ("view", "reshape"), "view": ("view", "reshape", "flatten"),
    "convolution": ("nn.functional.conv2d", "nn.functional.conv_transpose2d"),
    "copy": ("copy_",), "index": ("__getitem__",),
    "max_pool1d_with_indices": ("nn.functional.max_pool1d",),
    "max_pool2d_with_indices": ("nn.functional.max_pool2d",),
    "max_pool3d_with_indices": ("nn.functional.max_pool3d",),
    "upsample_nearest1d": ("nn.functional.interpolate",), "upsample_nearest2d": ("nn.functional.interpolate",),
    "upsample_nearest3d": ("nn.functional.interpolate",), "upsample_linear1d": ("nn.functional.interpolate",),
    "upsample_bilinear2d": ("nn.functional.interpolate", "nn.functional.upsample_bilinear"),
    "upsample_trilinear3d": ("nn.functional.interpolate",), "upsample_bicubic2d": ("nn.functional.interpolate",),
    "grid_sampler_2d": ("nn.functional.grid_sample",),
    "native_layer_norm": ("nn.functional.layer_norm",), "native_group_norm": ("nn.functional.group_norm",),
    "slice": ("__getitem__", "narrow"), "select": ("__getitem__", "select"),
    "embedding_renorm": ("nn.functional.embedding",),
    "clamp_min": ("clamp_min", "clamp"), "clamp_max": ("clamp_max", "clamp"),
    "full": ("full", "zeros", "ones", "new_full", "new_zeros", "new_ones"),
    "full_like": ("full_like", "zeros_like", "ones_like"),
    "arange": ("arange",), "max": ("max.reduction_no_dim", "max.reduction_with_dim", "max.binary"),
    "min": ("min.reduction_no_dim", "min.reduction_with_dim", "min.binary"),
}

logger = logging.getLogger("opinfo_sweep")


@functools.cache
def op_db() -> list[Any]:
    from torch.testing._internal.common_methods_invocations import op_db as database

    return list(database)


def _entry_key(entry: Any) -> str:
    return f"{entry.name}.{entry.variant_test_name}" if entry.variant_test_name else entry.name


def candidates(target: str) -> list[Any]:
    """The OpInfo entries whose samples may exercise `target` ("aten.add.Tensor")."""
    base = target.split(".")[1]
    names = {base, f"nn.functional.{base}", *ALIASES.get(base, ())}
    return [e for e in op_db() if e.name in names or e.aten_name == base or _entry_key(e) in names]


def sample_dtypes(entry: Any) -> list[torch.dtype]:
    supported = entry.supported_dtypes("cpu")
    return [dtype for dtype in DTYPES if dtype in supported]


class _Call(torch.nn.Module):
    """An OpInfo sample as a module: its tensors are the inputs, everything else is fixed."""

    def __init__(self, fn: Any, spec: pytree.TreeSpec, leaves: list[Any]) -> None:
        super().__init__()
        self.fn, self.spec, self.leaves = fn, spec, leaves

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


def _compare(got: np.ndarray, want: torch.Tensor) -> str:
    """"" when `got` is torch's `want`, else what differs."""
    from exporter.dtypes import numpy_type

    if want.dtype == torch.bfloat16:
        want_np = want.float().numpy()
        got = got.astype(np.float32) if got.dtype != np.float32 else got
    else:
        want_np = want.numpy()
        if got.dtype != numpy_type(want.dtype):
            return f"dtype {got.dtype}, torch gives {want.dtype}"
    if tuple(got.shape) != tuple(want_np.shape):
        return f"shape {tuple(got.shape)}, torch gives {tuple(want_np.shape)}"
    if want.dtype.is_floating_point:
        atol, rtol = TOLERANCES.get(want.dtype, TOLERANCES[torch.float32])
        a, b = got.astype(np.float64), want_np.astype(np.float64)
        close = np.isclose(a, b, atol=atol, rtol=rtol, equal_nan=True)
        if not close.all():
            finite = np.isfinite(a) & np.isfinite(b)
            worst = float(np.max(np.abs(a - b)[finite])) if finite.any() else float("nan")
            return f"values differ: {int((~close).sum())} of {close.size}, max abs {worst:.3g}"
        return ""
    return "" if np.array_equal(got, want_np) else "values differ (exact dtype)"


def run_sample(entry: Any, sample: Any, claimed: set[str]) -> Outcome | None:
    """Export one sample and compare it with torch; None when the sample is not one for
    `claimed` (its program holds none of them) or returns no tensors."""
    from exporter.dtypes import to_numpy
    from harness.backend import prepare
    from tests.op_table.table import program_targets

    leaves, spec = pytree.tree_flatten(_detached((sample.input, tuple(sample.args), dict(sample.kwargs))))
    module = _Call(entry.op, spec, leaves)
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
        return Outcome(exercised, False, f"export: {' '.join(str(error).split())[:300]}")
    try:
        got = prepare(model, "CPU").run([to_numpy(t) for t in tensors])
    except Exception as error:
        return Outcome(exercised, False, f"onnxruntime: {' '.join(str(error).split())[:300]}")
    if len(got) != len(expected):
        return Outcome(exercised, False, f"{len(got)} outputs, torch has {len(expected)}")
    for index, (actual, want) in enumerate(zip(got, expected)):
        problem = _compare(actual, want)
        if problem:
            return Outcome(exercised, False, f"output {index}: {problem}")
    return Outcome(exercised, True)


def sweep_entry(entry: Any, claimed: set[str], max_samples: int) -> dict[str, Any]:
    """Every sample of one entry in each of its dtypes: {dtype: [[index, targets, passed, reason]]}."""
    results: dict[str, Any] = {}
    for dtype in sample_dtypes(entry):
        rows = []
        try:
            samples = list(entry.sample_inputs("cpu", dtype, requires_grad=False))[:max_samples]
        except Exception as error:
            logger.warning("%s %s: no samples (%s)", _entry_key(entry), dtype, error)
            continue
        for index, sample in enumerate(samples):
            outcome = run_sample(entry, sample, claimed)
            if outcome is not None:
                rows.append([index, outcome.targets, outcome.passed, outcome.reason])
        results[str(dtype).removeprefix("torch.")] = rows
    return results


def registered_targets() -> list[str]:
    return [t for t in BUILTINS.targets() if t.startswith("aten.")]


def entries_for(targets: Iterable[str]) -> dict[str, tuple[Any, set[str]]]:
    """entry key -> (entry, the overloads it is a candidate for)."""
    table: dict[str, tuple[Any, set[str]]] = {}
    for target in targets:
        for entry in candidates(target):
            table.setdefault(_entry_key(entry), (entry, set()))[1].add(target)
    return table


def summarize(results: dict[str, Any]) -> dict[str, dict[str, list[int]]]:
    """overload -> dtype -> [passed, total], from the per-entry results."""
    summary: dict[str, dict[str, list[int]]] = {}
    for per_dtype in results.get("entries", {}).values():
        for dtype, rows in per_dtype.items():
            for _, targets, passed, _ in rows:
                for target in targets:
                    cell = summary.setdefault(target, {}).setdefault(dtype, [0, 0])
                    cell[0] += int(passed)
                    cell[1] += 1
    return summary


def load(path: Path = RESULTS) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.exists() else {"entries": {}}


def sweep(patterns: Sequence[str] | None, max_samples: int, redo: bool, path: Path = RESULTS) -> dict[str, Any]:
    """Run the sweep for the registered overloads matching `patterns`, saving after each entry."""
    targets = [t for t in registered_targets() if not patterns or any(fnmatch.fnmatchcase(t, p) for p in patterns)]
    results = load(path)
    results.update(opset=OPSET, max_samples=max_samples, torch=torch.__version__)
    for key, (entry, claimed) in sorted(entries_for(targets).items()):
        if key in results["entries"] and not redo:
            continue
        logger.info("%s (%s)", key, ", ".join(sorted(claimed)))
        results["entries"][key] = sweep_entry(entry, claimed, max_samples)
        results["summary"] = summarize(results)
        write_text_atomic(path, json.dumps(results, indent=1, sort_keys=True) + "\n")
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="fnmatch patterns of overloads (aten.add.*), comma-separated")
    parser.add_argument("--max-samples", type=int, default=MAX_SAMPLES, help="samples per entry and dtype")
    parser.add_argument("--redo", action="store_true", help="run entries already recorded again")
    parser.add_argument("--write-xfails", action="store_true",
                        help="only rewrite tests/opinfo_xfails.json from the recorded failures (review the diff)")
    options = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if options.write_xfails:
        write_text_atomic(XFAILS, json.dumps(expected_failures(load()), indent=1, sort_keys=True) + "\n")
        return 0
    patterns = [p.strip() for p in options.only.split(",")] if options.only else None
    sweep(patterns, options.max_samples, options.redo)
    return 0



# -- expected failures ----------------------------------------------------------------------------

XFAILS = ROOT / "tests" / "opinfo_xfails.json"
_NO_KERNEL = re.compile(r"Could not find an implementation for (\w+)\((\d+)\)")


def explain(reason: str, dtype: str) -> str:
    """A failure's reason, as the xfail table states it."""
    if "Numpy_type 256" in reason:
        return "bfloat16 inputs cannot be fed to onnxruntime from numpy (numpy has no bfloat16)"
    missing = _NO_KERNEL.search(reason)
    if missing:
        return f"onnxruntime CPU has no {dtype} kernel for {missing.group(1)}-{missing.group(2)}"
    return reason


def expected_failures(results: dict[str, Any]) -> dict[str, str]:
    """"entry|dtype|sample index" -> reason, for every failing sample of the recorded sweep."""
    table = {}
    for key, per_dtype in sorted(results.get("entries", {}).items()):
        for dtype, rows in sorted(per_dtype.items()):
            for index, _, passed, reason in rows:
                if not passed:
                    table[f"{key}|{dtype}|{index}"] = explain(reason, dtype)
    return table


if __name__ == "__main__":
    sys.exit(main())
