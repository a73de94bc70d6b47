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
CI_ENTRIES = ("logical_not", "fmod", "any", "nn.functional.interpolate.bilinear", "cumsum", "gather", "index_select")

# Registered overloads no recorded OpInfo sample reaches, and why (the nightly test holds the
# registry to this list: an overload is either exercised by samples or named here, and a
# named one that samples do reach must be taken off).
NO_OPINFO = {
    "aten._assert_scalar.default": "a runtime check torch.export inserts; no operator samples",
    "aten._assert_tensor_metadata.default": "a runtime check torch.export inserts; no operator samples",
    "aten.sym_size.int": "a size query of dynamic shapes; OpInfo samples are static",
    "aten.lstm.input": "no OpInfo entry for nn.LSTM (the op table and the zoo cover it)",
    "aten.gru.input": "no OpInfo entry for nn.GRU (the op table and the zoo cover it)",
    "aten.rnn_tanh.input": "no OpInfo entry for nn.RNN (the op table and the zoo cover it)",
    "aten.rnn_relu.input": "no OpInfo entry for nn.RNN (the op table and the zoo cover it)",
    "aten.native_dropout.default": "OpInfo's dropout samples are random (training mode)",
}
# Overloads that capture never produces from OpInfo's calls: torch.export keeps the public op
# whole (it is registered too), so the kernel form is reached only by calling it directly,
# as the op table's rows do.
_KEPT_WHOLE = "torch.export keeps the public op whole; only a direct call (the op table's rows) reaches this form"
# Python-number operands: the recorded samples (the first of each entry) pass tensors, which
# torch routes to the .Tensor overload; the op table's rows cover the scalar form.
_SCALAR_FORM = "the recorded OpInfo samples pass tensor operands (the .Tensor overload); the op table covers this form"
# Forms the recorded samples (the first `max_samples` per entry and dtype) do not reach.
_NOT_IN_RECORDED = "not reached by the recorded samples (the first ones per entry); the op table covers it"
NO_OPINFO.update({
    **dict.fromkeys(["aten._adaptive_avg_pool2d.default", "aten._adaptive_avg_pool3d.default", "aten._softmax.default",
                     "aten._log_softmax.default", "aten.convolution.default", "aten.alias.default",
                     "aten._unsafe_view.default", "aten.copy.default"], _KEPT_WHOLE),
    **dict.fromkeys(["aten.add.Scalar", "aten.sub.Scalar", "aten.mul.Scalar", "aten.div.Scalar", "aten.div.Scalar_mode",
                     "aten.eq.Scalar", "aten.ne.Scalar", "aten.lt.Scalar", "aten.le.Scalar", "aten.gt.Scalar",
                     "aten.ge.Scalar", "aten.fmod.Scalar", "aten.remainder.Scalar", "aten.pow.Scalar",
                     "aten.pow.Tensor_Scalar", "aten.clamp.default", "aten.clamp_min.default",
                     "aten.clamp_max.default"], _SCALAR_FORM),
    **dict.fromkeys(["aten.conv2d.padding", "aten.upsample_nearest3d.vec"], _NOT_IN_RECORDED),
})


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
            ci = key in CI_ENTRIES and dtype == "float32"
            params.append(pytest.param(key, dtype, id=f"{key}-{dtype}", marks=() if ci else (pytest.mark.nightly,)))
    return params


def test_ci_entries_are_recorded() -> None:
    assert set(CI_ENTRIES) <= set(RECORDED.get("entries", {})), "run python tools/opinfo_sweep.py"


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

    entry = next(e for e in SWEEP.op_db() if SWEEP._entry_key(e) == entry_key)
    claimed = SWEEP.entries_for(SWEEP.registered_targets())[entry_key][1]
    samples = list(entry.sample_inputs("cpu", getattr(torch, dtype), requires_grad=False))[: RECORDED["max_samples"]]
    unexpected, fixed = [], []
    for index, sample in enumerate(samples):
        outcome = SWEEP.run_sample(entry, sample, claimed)
        if outcome is None:
            continue
        listed = f"{entry_key}|{dtype}|{index}"
        if not outcome.passed and listed not in XFAILS:
            unexpected.append(f"sample {index} ({', '.join(outcome.targets)}): {outcome.reason}")
        elif outcome.passed and listed in XFAILS:
            fixed.append(f"sample {index} passes now (listed: {XFAILS[listed]})")
    assert not unexpected, "\n".join(unexpected)
    assert not fixed, "\n".join(fixed) + "\nremove it from tests/opinfo_xfails.json"
