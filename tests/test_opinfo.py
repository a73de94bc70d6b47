"""PyTorch's OpInfo samples against every ATen overload the registry claims.

For each OpInfo entry that reaches a registered overload (tools/opinfo_sweep.py decides which)
and each dtype it supports among float32, float16, bfloat16 and int64, the test exports every
sample, runs it on onnxruntime CPU and compares it with torch. A failing sample must be listed
in tests/opinfo_xfails.json under "entry|dtype|sample index" with its reason; a listed sample
that passes fails the test too (strict). The full sweep is nightly; CI runs a few entries of
the newest symbolics in float32.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Entries whose float32 samples CI runs (seconds): the operators this exporter added last.
CI_ENTRIES = ("logical_not", "fmod", "any", "nn.functional.interpolate.bilinear", "cumsum", "gather", "index_select",
              "repeat", "softmax@aten._softmax.default", "add@aten.add.Scalar")
# ...and these (entry, dtype) pairs: bfloat16 runs on onnxruntime where it has kernels, else on onnx.reference.
CI_PAIRS = (("nn.functional.relu", "bfloat16"), ("nn.functional.conv2d", "bfloat16"), ("full", "bfloat16"))

# Registered overloads no recorded OpInfo sample reaches, and why (the nightly test holds the
# registry to this list: an overload is either exercised by samples or named here, and a
# named one that samples do reach must be taken off).
NO_OPINFO = {
    "aten._assert_scalar.default": "a runtime check torch.export inserts; no operator samples",
    "aten._assert_tensor_metadata.default": "a runtime check torch.export inserts; no operator samples",
    "aten.sym_size.int": "a size query of dynamic shapes; OpInfo samples are static",
    **{f"_operator.{name}": "SymInt arithmetic on dynamic sizes; OpInfo samples are static"
       for name in ("add", "floordiv", "ge", "le", "mul", "sub")},
}


def _sweep() -> ModuleType:
    spec = importlib.util.spec_from_file_location("opinfo_sweep", ROOT / "tools" / "opinfo_sweep.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


SWEEP = _sweep()
XFAILS: dict[str, str] = json.loads(SWEEP.XFAILS.read_text()) if SWEEP.XFAILS.exists() else {}
RECORDED = SWEEP.load()


def _params() -> list:
    """(entry key, dtype) pairs of the recorded sweep; CI's few float32 ones unmarked."""
    params = []
    for key, per_dtype in sorted(RECORDED.get("entries", {}).items()):
        for dtype in sorted(per_dtype):
            ci = (key in CI_ENTRIES and dtype == "float32") or (key, dtype) in CI_PAIRS
            params.append(pytest.param(key, dtype, id=f"{key}-{dtype}", marks=() if ci else (pytest.mark.nightly,)))
    return params


def test_ci_entries_are_recorded() -> None:
    recorded = RECORDED.get("entries", {})
    assert set(CI_ENTRIES) <= set(recorded), "run python tools/opinfo_sweep.py"
    assert all(dtype in recorded[key] for key, dtype in CI_PAIRS), "run python tools/opinfo_sweep.py"


def test_every_xfail_names_a_recorded_sample_and_a_reason() -> None:
    for key, reason in XFAILS.items():
        entry, dtype, index = key.split("|")
        rows = RECORDED["entries"][entry][dtype]
        assert int(index) in {row[0] for row in rows}, key
        assert reason.strip(), key


@pytest.mark.nightly
def test_every_registered_overload_has_samples_or_a_reason() -> None:
    summary = SWEEP.summarize(RECORDED)
    unexercised = [t for t in SWEEP.registered_targets() if t not in summary and t not in NO_OPINFO]
    assert not unexercised, f"no OpInfo sample reaches {unexercised}: map them in ALIASES or explain in NO_OPINFO"
    reached = sorted(set(NO_OPINFO) & set(summary))
    assert not reached, f"OpInfo samples now reach {reached}: take them off NO_OPINFO"


@pytest.mark.parametrize(("entry_key", "dtype"), _params())
def test_opinfo_samples(entry_key: str, dtype: str) -> None:
    import torch

    entry, call = SWEEP.resolve(entry_key)
    claimed = SWEEP.entries_for(SWEEP.registered_targets())[entry_key][1]
    samples = SWEEP.samples_of(entry, getattr(torch, dtype), RECORDED["max_samples"], call)
    recorded = {row[0] for row in RECORDED["entries"][entry_key][dtype]}
    unexpected, fixed = [], []
    for index, sample in enumerate(samples):
        if call is not None and index not in recorded:
            continue  # a kernel form runs the recorded samples that fit it, not every one
        outcome = SWEEP.run_sample(entry, sample, claimed, call)
        if outcome is None:
            continue
        listed = f"{entry_key}|{dtype}|{index}"
        if not outcome.passed and listed not in XFAILS:
            unexpected.append(f"sample {index} ({', '.join(outcome.targets)}): {outcome.reason}")
        elif outcome.passed and listed in XFAILS:
            fixed.append(f"sample {index} passes now (listed: {XFAILS[listed]})")
    assert not unexpected, "\n".join(unexpected)
    assert not fixed, "\n".join(fixed) + "\nremove it from tests/opinfo_xfails.json"
