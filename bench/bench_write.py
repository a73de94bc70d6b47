"""Writing an export to a file: the exporter's streaming writer against onnx_ir's `ir.save`.

The exporter writes a model file straight from its weights (exporter.write.external_data:
one file written as protobuf's wire format allows, or external data). onnx_ir's `ir.save`
builds the whole ModelProto first and serialises it, which costs copies of the weights. This
measures what each costs where it counts, so the streaming writer stays only where it is needed:
per case and writer, a fresh process exports the model (`exporter.export_program`), resets the
kernel's high-water mark, writes the file, and records the peak resident set over the RSS before
writing (the write's own extra memory) and the seconds. Both writers run interleaved, one process
each per round; the lowest peak and the fastest write count. Results in
bench/results/bench_write.json; tools/gen_performance_doc.py renders them.

    python bench/bench_write.py --cases vgg16 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

WRITERS = ("streaming", "onnx_ir", "streaming_external", "onnx_ir_external")
"""The exporter's writer (ExportResult.save) and onnx_ir's (ir.save), to one file and with
external data."""


def child(case_name: str, writer: str) -> dict[str, Any]:
    """One write, in this process (the parent runs it as a fresh child)."""
    import onnx_ir as ir

    import exporter
    import model_zoo_cases
    from bench_memory import _peak_bytes, _reset_peak, _rss_bytes
    from harness.runtime.memory import release_freed_memory

    case = model_zoo_cases.get(case_name)
    result = exporter.export_program(case.module(0), case.inputs(0))
    release_freed_memory()
    before = _rss_bytes()
    _reset_peak()
    with tempfile.TemporaryDirectory(prefix="bench-write-") as folder:
        path = os.path.join(folder, "model.onnx")
        started = time.perf_counter()
        if writer == "streaming":
            result.save(path, external_data=False)
        elif writer == "streaming_external":
            result.save(path, external_data=True)
        elif writer == "onnx_ir":
            ir.save(result.ir_model, path)
        elif writer == "onnx_ir_external":
            ir.save(result.ir_model, path, external_data="model.onnx.data")
        else:
            raise ValueError(f"unknown writer {writer!r}: one of {', '.join(WRITERS)}")
        seconds = time.perf_counter() - started
        extra = _peak_bytes() - before
        written = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
    return {"case": case_name, "writer": writer, "extra_peak_bytes": extra, "seconds": seconds,
            "file_bytes": written, "weight_bytes": result.weight_bytes}


def _measure(case_name: str, writer: str) -> dict[str, Any]:
    command = [sys.executable, os.path.abspath(__file__), "--child", case_name, writer]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{case_name} {writer}: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default="vgg16", help="comma-separated zoo cases")
    parser.add_argument("--rounds", type=int, default=2, help="fresh processes per writer and case, interleaved")
    parser.add_argument("--json", default=None, help="default bench/results/bench_write.json")
    parser.add_argument("--child", nargs=2, default=None, help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.child:
        print(json.dumps(child(*options.child)))
        return 0
    from _common import machine_info, write_results

    machine = machine_info()
    rows = []
    for case_name in options.cases.split(","):
        runs: dict[str, list[dict[str, Any]]] = {writer: [] for writer in WRITERS}
        loads = []
        for round_index in range(options.rounds):
            for writer in WRITERS if round_index % 2 == 0 else WRITERS[::-1]:
                loads.append(round(os.getloadavg()[0], 2))
                runs[writer].append(_measure(case_name, writer))
                print(json.dumps(runs[writer][-1]), file=sys.stderr, flush=True)
        for writer, measured in runs.items():
            rows.append({"case": case_name, "writer": writer, "weight_bytes": measured[0]["weight_bytes"],
                         "extra_peak_bytes": min(m["extra_peak_bytes"] for m in measured),
                         "seconds": min(m["seconds"] for m in measured), "file_bytes": measured[0]["file_bytes"],
                         "runs": measured, "loads": loads})
    path = write_results("bench_write", machine, rows, options={"cases": options.cases, "rounds": options.rounds},
                         path=options.json)
    print("\n".join(f"{row['case']} {row['writer']}: extra peak {row['extra_peak_bytes'] / 2**30:.3f} GiB, "
                    f"{row['seconds']:.2f} s" for row in rows) + f"\nresults in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
