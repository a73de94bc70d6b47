"""PyTorch's OpInfo samples against every ATen overload the registry claims.

For each OpInfo entry that reaches a registered overload (op_table.opinfo decides which)
and each dtype it supports among float32, float16, bfloat16 and int64, the test exports every
sample, runs it on onnxruntime CPU and judges it as the harness judges an op (its tolerance rows
and its verdict against the fp64 truth: op_table.opinfo.judge). A failing sample must be covered
by an expectation of tests/opinfo_expectations.py (entry, dtype, a predicate on the sample,
the failure's regex, the reason); a sample a strict expectation covers that passes fails the
test too. Each entry must run as many samples as the recorded sweep (docs/opinfo.json): a
sample whose capture fails, or that no longer reaches its overload, is counted missing, so a
capture regression cannot shrink the sweep silently; pairs that run no sample are listed in
NO_SAMPLES with their reason. The full sweep is nightly (`pytest -m nightly`, scheduled in
.github/workflows/nightly.yml and `tox -e nightly`); CI runs a few entries in float32.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import op_table.opinfo as SWEEP

ROOT = Path(__file__).resolve().parents[1]

# Entries whose float32 samples CI runs (seconds): the operators this exporter added last.
CI_ENTRIES = ("logical_not", "fmod", "any", "nn.functional.interpolate.bilinear", "cumsum", "gather", "index_select",
              "repeat", "softmax@aten._softmax.default", "add@aten.add.Scalar")
# ...and these (entry, dtype) pairs: bfloat16 runs on onnxruntime where it has kernels, else on onnx.reference.
CI_PAIRS = (("nn.functional.relu", "bfloat16"), ("nn.functional.conv2d", "bfloat16"), ("full", "bfloat16"),
            ("grid_sampler_2d", "bfloat16"))  # its nearest picks on .5 ties settled (op_table.opinfo.judge)

# Registered overloads no recorded OpInfo sample reaches, and why (the nightly test holds the
# registry to this list: an overload is either exercised by samples or named here, and a
# named one that samples do reach must be taken off).
NO_OPINFO = {
    "aten._assert_scalar.default": "a runtime check torch.export inserts; no operator samples",
    "aten._assert_tensor_metadata.default": "a runtime check torch.export inserts; no operator samples",
    "aten.sym_size.int": "a size query of dynamic shapes; OpInfo samples are static",
    "aten.sym_numel.default": "a size query of dynamic shapes; OpInfo samples are static",
    **{f"_operator.{name}": "SymInt arithmetic on dynamic sizes; OpInfo samples are static"
       for name in ("add", "floordiv", "ge", "le", "mul", "sub")},
    "aten._assert_async.msg": "a runtime check torch.export inserts; no operator samples",
    # no OpInfo entry is named after these: Python operator forms, internal kernels that only
    # torch's decompositions or a module's code produce; the op table's rows exercise each
    **{f"aten.{name}": "no OpInfo entry is named after it (a Python operator form or an internal kernel); "
       "exercised by the op table's rows"
       for name in ("__lshift__.Scalar", "__lshift__.Tensor", "__rshift__.Scalar", "__rshift__.Tensor",
                    "_embedding_bag.default", "_embedding_bag_forward_only.default", "_fft_c2c.default",
                    "_fft_c2r.default", "_fft_r2c.default", "_local_scalar_dense.default",
                    "_unique2.default", "_upsample_bicubic2d_aa.default", "blackman_window.default",
                    "blackman_window.periodic", "hamming_window.default", "hamming_window.periodic",
                    "hamming_window.periodic_alpha", "hamming_window.periodic_alpha_beta",
                    "normal_functional.default", "rand.default", "rrelu_with_noise_functional.default",
                    "unique_dim.default")},
    # the entry's samples pass tensors, so they reach the Tensor overload, never the scalar one
    **{f"aten.{name}": "its entry's samples pass tensors and reach the .Tensor overload; a Python scalar "
       "argument selects this one: exercised by the op table's rows"
       for name in ("bitwise_and.Scalar", "bitwise_and.Scalar_Tensor", "bitwise_or.Scalar",
                    "bitwise_or.Scalar_Tensor", "bitwise_xor.Scalar", "bitwise_xor.Scalar_Tensor",
                    "bitwise_left_shift.Scalar_Tensor", "bitwise_left_shift.Tensor_Scalar",
                    "bitwise_right_shift.Scalar_Tensor", "bitwise_right_shift.Tensor_Scalar",
                    "remainder.Scalar_Tensor", "scatter.value", "bernoulli.p")},
    "aten.normal.float_Tensor": "normal's samples reach Tensor_Tensor, Tensor_float and float_float, never a "
                                "float mean with a tensor std: exercised by the op table's rows",
    **{f"aten.{name}.default": "F.interpolate's samples give sizes or scales and capture as the .vec overload; "
       "this form (an output size) is what decompositions and direct calls produce: exercised by the op "
       "table's rows"
       for name in ("upsample_bicubic2d", "upsample_bilinear2d", "upsample_linear1d", "upsample_nearest1d",
                    "upsample_nearest2d", "upsample_nearest3d", "upsample_trilinear3d")},
    "aten.rand_like.default": "rand_like's entry yields no sample the sweep can run (its recorded rows are "
                              "empty in every dtype); the random-op rows check it by distribution",
    "aten.view_as_real.default": "view_as_real's samples take complex inputs, which an ONNX graph cannot receive; "
                                 "exercised by the FFT rows, on complex values made inside the graph",
}


RESULTS = ROOT / "docs" / "opinfo.json"  # recorded by tools/opinfo_sweep.py
RECORDED = SWEEP.load(RESULTS)
sys.path.insert(0, str(ROOT / "tests"))
import opinfo_expectations as EXPECTED  # noqa: E402  (tests/ is not a package)


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


def test_every_expectation_names_recorded_entries_and_dtypes() -> None:
    """An expectation whose patterns match no recorded (entry, dtype) is stale or misspelt."""
    import fnmatch

    recorded = RECORDED["entries"]
    for expectation in EXPECTED.EXPECTATIONS:
        for pattern in expectation.entries:
            keys = [k for k in recorded if fnmatch.fnmatchcase(k, pattern)]
            assert keys, f"{pattern!r} names no recorded entry ({expectation.reason})"
            assert any(d in recorded[k] for k in keys for d in expectation.dtypes), (pattern, expectation.dtypes)


def test_no_samples_pairs_are_recorded_without_samples() -> None:
    """NO_SAMPLES lists exactly the recorded pairs that ran no sample, each with a reason."""
    empty = {(k, d) for k, per_dtype in RECORDED["entries"].items() for d, rows in per_dtype.items() if not rows}
    assert empty == set(EXPECTED.NO_SAMPLES), (
        f"ran no sample, unlisted: {sorted(empty - set(EXPECTED.NO_SAMPLES))}; listed but ran samples: "
        f"{sorted(set(EXPECTED.NO_SAMPLES) - empty)}")
    assert all(reason.strip() for reason in EXPECTED.NO_SAMPLES.values())


@pytest.mark.parametrize("error", [r"values differ", r"output 1: values differ", r"differ", r".*"])
def test_an_expected_failure_cannot_excuse_any_numeric_difference(error: str) -> None:
    with pytest.raises(ValueError, match="must be a tolerance"):
        EXPECTED.Expectation(("sort",), ("float16",), "ties", error)


BOUNDED = [e for e in EXPECTED.EXPECTATIONS if e.tolerance]


@pytest.mark.parametrize("expectation", BOUNDED, ids=[e.entries[0] for e in BOUNDED])
def test_a_bounded_expectation_still_fails_garbage(expectation) -> None:
    """Each (rtol, atol) of a bounded expectation fails a regression to garbage: outputs of unit
    scale (the smallest of the covered entries') against independent ones of the same scale."""
    import torch

    from op_table.opinfo.judge import ProgramFacts, judge_output

    for dtype, tolerance in expectation.tolerance.items():
        output = torch.float32 if dtype == "int64" else getattr(torch, dtype)  # an int64 sample's float output
        want = (torch.rand(256, generator=torch.Generator().manual_seed(0)) * 2 - 1).to(output)
        garbage = (torch.rand(256, generator=torch.Generator().manual_seed(1)) * 2 - 1).to(output).float().numpy()
        exact = want.float().numpy()
        facts = ProgramFacts(1, 1)
        assert judge_output(exact, want, None, targets=("aten.x",), facts=facts, tolerance=tolerance) == ""
        failure = judge_output(garbage, want, None, targets=("aten.x",), facts=facts, tolerance=tolerance)
        assert "values differ" in failure, (dtype, tolerance, failure)


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
    samples = SWEEP.samples_of(entry, getattr(torch, dtype), SWEEP.recorded_max_samples(RECORDED, entry_key, dtype),
                               call)
    recorded = {row[0] for row in RECORDED["entries"][entry_key][dtype]}
    ran, unexpected, fixed = [], [], []
    for index, sample in enumerate(samples):
        if call is not None and index not in recorded:
            continue  # a kernel form runs the recorded samples that fit it, not every one
        expectation = EXPECTED.expectation_for(entry_key, dtype, sample)
        tolerance = expectation.tolerance_for(dtype) if expectation is not None else None
        outcome = SWEEP.run_sample(entry, sample, claimed, call, tolerance=tolerance)
        if outcome is None:
            continue
        ran.append(index)
        if outcome.passed:
            if expectation is not None and expectation.strict:
                fixed.append(f"sample {index} passes now; take its expectation off ({expectation.reason})")
        elif expectation is None or not expectation.explains(outcome.reason):
            covered = (f" (judged at its expectation's (rtol, atol) {tolerance})" if tolerance is not None
                       else f" (its expectation wants /{expectation.error}/)" if expectation else "")
            unexpected.append(f"sample {index} ({', '.join(outcome.targets)}){covered}: {outcome.reason}")
    assert not unexpected, "\n".join(unexpected) + "\nfix it, or add a scoped Expectation to tests/opinfo_expectations.py"
    assert not fixed, "\n".join(fixed)
    if (entry_key, dtype) in EXPECTED.NO_SAMPLES:
        assert not ran, f"samples {ran} run now: take ({entry_key}, {dtype}) off NO_SAMPLES"
        return
    assert ran, f"no sample of {entry_key} in {dtype} reached {sorted(claimed)}; list it in NO_SAMPLES with the reason"
    assert set(ran) == recorded, (
        f"{len(ran)} samples ran, the recorded sweep ran {len(recorded)}: missing {sorted(recorded - set(ran))}, "
        f"new {sorted(set(ran) - recorded)}. A capture that fails now, or a sample that no longer reaches "
        f"{sorted(claimed)}, shrinks the sweep; if the change is intended, rerun "
        "python tools/opinfo_sweep.py --redo --only <overload>")
