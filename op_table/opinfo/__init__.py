"""PyTorch's OpInfo samples against every ATen overload the registry claims, judged as the
harness judges an op: its tolerance rows and its verdict against the fp64 truth.

Each sample of a candidate entry (`entries`), in float32 and in float16, bfloat16 and int64
where the entry supports them, is captured alone; it counts for an overload when the captured
program holds that overload. It is exported at opset `run.OPSET`, run on onnxruntime's CPU
provider (`run`) and judged (`judge`). `record` keeps the results, docs/opinfo.json in this
repository, which tools/opinfo_sweep.py writes and tests/test_opinfo.py replays.

    entries   which OpInfo entries run for which overloads; their samples (a fixed seed)
    forms     kernel forms (overloads reached by calling them with a public op's samples), modules
    run       one sample: capture, export, onnxruntime (or onnx.reference for bfloat16)
    judge     the verdict on its outputs: override rows, the rule against the fp64 truth
    record    the recorded sweep: run, resume, summarise
"""

from __future__ import annotations

from op_table.opinfo.entries import (
    DTYPES, MAX_SAMPLES, SAMPLE_SEED, entries_for, registered_targets, resolve, samples_of,
)
from op_table.opinfo.record import load, recorded_max_samples, summarize, sweep
from op_table.opinfo.run import OPSET, Outcome, run_sample

__all__ = ["DTYPES", "MAX_SAMPLES", "OPSET", "Outcome", "SAMPLE_SEED", "entries_for", "load", "recorded_max_samples",
           "registered_targets", "resolve", "run_sample", "samples_of", "summarize", "sweep"]
