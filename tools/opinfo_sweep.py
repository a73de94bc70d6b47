"""Run PyTorch's OpInfo samples against every ATen overload the registry claims and record the
results in docs/opinfo.json (tools/gen_op_table.py turns them into a column of OPERATORS.md).

The sweep is op_table.opinfo: each sample is exported, run on onnxruntime's CPU provider and
judged as the harness judges an op (its tolerance rows, its verdict against the fp64 truth).

    python tools/opinfo_sweep.py                            # entries not recorded yet (resumable)
    python tools/opinfo_sweep.py --only 'aten.add.*' --max-samples 4
    python tools/opinfo_sweep.py --redo --dtypes float32,float16,bfloat16   # rerun, each entry's own limit
    python tools/opinfo_sweep.py --redo --entries 'sort,topk,pow@*'        # these results keys only

tests/test_opinfo.py runs the same samples live: each entry must run as many samples as
recorded here, and each failure must be covered by an expectation of
tests/opinfo_expectations.py (scoped to entry, dtype and a predicate on the sample).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "docs" / "opinfo.json"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="fnmatch patterns of overloads (aten.add.*), comma-separated")
    parser.add_argument("--max-samples", type=int, default=None,
                        help="samples per entry and dtype (default: a recorded entry's own limit, else 12)")
    parser.add_argument("--redo", action="store_true", help="run entries already recorded again")
    parser.add_argument("--dtypes", help="only these dtypes (float32,bfloat16,...), run again and merged")
    parser.add_argument("--jobs", type=int, default=1, help="processes running entries side by side")
    parser.add_argument("--entries", help="fnmatch patterns of results keys (sort, pow@*), comma-separated")
    parser.add_argument("--results", type=Path, default=RESULTS, help="the results file (docs/opinfo.json)")
    options = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    import torch

    from op_table.opinfo import sweep

    patterns = [p.strip() for p in options.only.split(",")] if options.only else None
    dtypes = None
    if options.dtypes:
        names = [d.strip() for d in options.dtypes.split(",")]
        unknown = [n for n in names if n not in ("float32", "float16", "bfloat16", "int64")]
        if unknown:
            parser.error(f"--dtypes: {', '.join(unknown)} not among the sweep's float32, float16, bfloat16, int64")
        dtypes = [getattr(torch, name) for name in names]
    entries = [p.strip() for p in options.entries.split(",")] if options.entries else None
    sweep(options.results, patterns, max_samples=options.max_samples, redo=options.redo, dtypes=dtypes,
          jobs=options.jobs, entries=entries)
    return 0


if __name__ == "__main__":
    sys.exit(main())
