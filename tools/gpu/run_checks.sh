#!/usr/bin/env bash
# Run the CUDA legs on a GPU machine, most important first: the environment and provider check,
# the smoke tier per op on onnxruntime's CUDA and TensorRT providers, the CUDA-marked tests, the
# full tier on CUDA, the whole test suite on CUDA.
# Usage: tools/gpu/run_checks.sh OUTDIR [--quick]     (PYTHON=... picks the interpreter; python3)
#   --quick                    the smoke tier instead of the full one, and no whole-suite leg
#   ROUNDTRIP_GPU_DEADLINE_S   seconds the whole script may take (default: no limit). Each leg is
#                              interrupted (SIGINT, so pytest and roundtrip still write what they
#                              have) where it would run past it; summary.txt says which were cut.
#   ROUNDTRIP_GPU_CASES        narrows the provider leg to these cases (comma-separated)
#   ROUNDTRIP_GPU_JOBS         parallel cases in the full-tier leg (default 4)
# Where something is missing (the wheels, the driver, a GPU, a provider) it says what and runs on:
# on a machine without a GPU every CUDA leg ends at once with the reason the harness gives.
# Everything lands in OUTDIR; OUTDIR.tar.gz packs it at the end (one file to bring back).
set -uo pipefail
out=${1:?usage: tools/gpu/run_checks.sh OUTDIR [--quick]}
quick=${2:-}
python=${PYTHON:-python3}
deadline_s=${ROUNDTRIP_GPU_DEADLINE_S:-0}
jobs=${ROUNDTRIP_GPU_JOBS:-4}
cd "$(dirname "$0")/../.."
mkdir -p "$out"
out=$(cd "$out" && pwd)
export PYTHONUNBUFFERED=1
site=/tmp/roundtrip-site
began=$(date +%s)
reserve_s=20  # kept for the interrupted leg to write its files and for packing

pack() {
    tar czf "$out.tar.gz" -C "$(dirname "$out")" "$(basename "$out")" 2>/dev/null
}

# leg NAME LOG COMMAND...: run one leg under what is left of the deadline, log its exit and time.
leg() {
    local name=$1 log=$2
    shift 2
    local start limit status
    start=$(date +%s)
    if [ "$deadline_s" -gt 0 ]; then
        limit=$((deadline_s - (start - began) - reserve_s))
        if [ "$limit" -le 5 ]; then
            echo "$name: not run, the deadline (${deadline_s} s) is reached" | tee -a "$out/summary.txt"
            return
        fi
        timeout -s INT -k 15 "$limit" "$@" > "$log" 2>&1
    else
        "$@" > "$log" 2>&1
    fi
    status=$?
    local took=$(( $(date +%s) - start ))
    if [ "$status" = 124 ] || [ "$status" = 137 ]; then
        echo "$name: interrupted at the deadline after $took s (exit $status)" | tee -a "$out/summary.txt"
    else
        echo "$name: exit $status in $took s" | tee -a "$out/summary.txt"
    fi
    tail -3 "$log" | sed 's/^/    /' | tee -a "$out/summary.txt"
    pack
}

# failures_beyond_known JUNIT: the failed tests of a JUnit file, split into those that fail on the
# CPU as well under the GPU image's older torch (tools/gpu/known_failures.txt) and the others.
failures_beyond_known() {
    "$python" tools/gpu/junit_failures.py compare "$1" tools/gpu/known_failures.txt 2>&1 | sed 's/^/    /' \
        | tee -a "$out/summary.txt"
}

if ls .gpu-wheels/part-*/piece-* >/dev/null 2>&1; then
    # The pieces, in order, are one xz-compressed tar of the unpacked wheels (fetch_wheels.sh).
    rm -rf "$site" && mkdir -p "$site"
    cat $(ls .gpu-wheels/part-*/piece-* | sort -t/ -k3) | "$python" -c '
import lzma, sys, tarfile
with tarfile.open(fileobj=lzma.open(sys.stdin.buffer), mode="r|") as archive:
    archive.extractall(sys.argv[1], filter="data")
' "$site" > "$out/install.log" 2>&1 || { echo "unpacking the wheels failed; see $out/install.log" >&2; exit 3; }
    export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
    echo "wheels unpacked into $site in $(( $(date +%s) - began )) s" | tee -a "$out/summary.txt"
else
    echo "no .gpu-wheels/part-*/ folders (tools/gpu/fetch_wheels.sh makes them where there is network):" \
         "running on this environment's onnxruntime" | tee "$out/install.log"
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi

# The tests run `roundtrip` and pytest's plugin from the installed package (its console script and
# entry point): install this checkout, editable and without its dependencies, where it is not.
if ! "$python" -c "import importlib.metadata as m; m.distribution('roundtrip')" 2>/dev/null; then
    if "$python" -m pip install -q --no-deps --no-index --no-build-isolation -e . > "$out/install-roundtrip.log" 2>&1; then
        echo "roundtrip installed (editable, no dependencies)" | tee -a "$out/summary.txt"
    else
        echo "roundtrip could not be installed (see install-roundtrip.log): tests that run its console" \
             "script or a pytest subprocess with its plugin will fail for that reason" | tee -a "$out/summary.txt"
    fi
fi

{
    if command -v nvidia-smi >/dev/null; then
        nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    else
        echo "nvidia-smi: not found (no NVIDIA driver on this machine)"
    fi
    nproc | sed 's/^/cpu cores: /'
    "$python" - <<'PY'
import json, platform
import torch  # first, as users do: its CUDA libraries are then the ones onnxruntime finds
import numpy as np, onnx, onnxruntime as ort
from harness.runtime.devices import load_cuda_libraries
info = {"python": platform.python_version(), "torch": torch.__version__, "torch_cuda": torch.version.cuda,
        "onnx": onnx.__version__, "onnxruntime": ort.__version__, "onnxruntime_file": ort.__file__,
        "providers": ort.get_available_providers(),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
load_cuda_libraries()
# A session on CUDA must really run there: one MatMul, its provider assignment read back.
from onnx import helper, TensorProto
graph = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["c"], name="mm")], "g",
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, [64, 64]) for n in "ab"],
                          [helper.make_tensor_value_info("c", TensorProto.FLOAT, [64, 64])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
options = ort.SessionOptions()
options.add_session_config_entry("session.record_ep_graph_assignment_info", "1")  # read back below
session = ort.InferenceSession(model.SerializeToString(), options,
                               providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
info["session_providers"] = session.get_providers()
a = np.random.default_rng(0).standard_normal((64, 64), dtype=np.float32)
reference = a.astype(np.float64) @ a.astype(np.float64)
info["matmul_max_abs_err"] = float(np.abs(session.run(None, {"a": a, "b": a})[0] - reference).max())
assignment = getattr(session, "get_provider_graph_assignment_info", None)
info["graph_assignment_api"] = assignment is not None
if assignment is not None:
    try:
        info["graph_assignment"] = [
            {"ep": sub.ep_name, "nodes": [f"{node.op_type} {node.name}" for node in sub.get_nodes()]}
            for sub in assignment()]
    except Exception as error:  # report what the API said instead of failing the whole check
        info["graph_assignment_error"] = f"{type(error).__name__}: {error}"
for provider in ("CUDAExecutionProvider", "TensorrtExecutionProvider"):
    if provider not in info["providers"]:
        info.setdefault("missing", []).append(f"{provider}: this onnxruntime ({ort.__version__}) does not have it")
if "CUDAExecutionProvider" in info["providers"] and "CUDAExecutionProvider" not in info["session_providers"]:
    info.setdefault("missing", []).append("CUDAExecutionProvider is listed but a session could not start it "
                                          "(its load error is printed above)")
if info["gpu"] is None:
    info.setdefault("missing", []).append("a CUDA device: torch.cuda.is_available() is False")
import ctypes.util
info["tensorrt_library"] = ctypes.util.find_library("nvinfer") or "libnvinfer: not found on the loader's path"
print(json.dumps(info, indent=1))
PY
} > "$out/environment.txt" 2>&1
cat "$out/environment.txt"
pack

has_gpu=0
"$python" -c "import sys, torch; sys.exit(not torch.cuda.is_available())" 2>/dev/null && has_gpu=1

# The smoke tier on onnxruntime's CUDA and TensorRT providers, per op, against one fp64 truth: a
# provider this onnxruntime or machine lacks (TensorRT's libraries) is a named skip in the report.
# Without a GPU the two providers follow onnxruntime on the CPU, so that the report names why each
# is skipped (ROUNDTRIP_GPU_CASES=small_conv_net narrows it).
if [ "$has_gpu" = 1 ]; then
    legs=(--device cuda)
else
    legs=(--device cpu --backend onnxruntime)
    echo "no CUDA device: the CUDA and TensorRT providers run after onnxruntime on the CPU, as named skips" \
        | tee -a "$out/summary.txt"
fi
leg "smoke tier per op on onnxruntime:provider=cuda + onnxruntime:provider=tensorrt" "$out/backends.log" \
    "$python" -m harness.cli run "${legs[@]}" --tier smoke ${ROUNDTRIP_GPU_CASES:+--cases "$ROUNDTRIP_GPU_CASES"} \
    --backend onnxruntime:provider=cuda --backend onnxruntime:provider=tensorrt --out "$out/backends"
"$python" - "$out/backends/parity.json" <<'PY' 2>/dev/null | tee -a "$out/summary.txt"
import json, sys
cases = json.load(open(sys.argv[1]))["cases"]
seen = {}
for case in cases:
    for result in (case.get("verification") or {}).get("backend_results", []):
        entry = seen.setdefault(result["backend"], {"cases": 0, "passed": 0, "skipped": set()})
        entry["cases"] += 1
        entry["passed"] += bool(result.get("passed"))
        if result.get("skipped"):
            entry["skipped"].add(result["skipped"])
for backend, entry in sorted(seen.items()):
    line = f"    {backend}: {entry['passed']}/{entry['cases']} cases passed"
    print(line + "".join(f"; skipped: {why}" for why in sorted(entry["skipped"])))
PY

leg "CUDA-marked tests (pytest -n auto --device cuda -m cuda)" "$out/pytest-cuda.log" \
    "$python" -m pytest -n auto --device cuda -p no:cacheprovider -m cuda -rfEs -q \
    --junitxml="$out/junit-cuda.xml"
failures_beyond_known "$out/junit-cuda.xml"

tier=full
[ "$quick" = "--quick" ] && tier=smoke
leg "$tier tier on CUDA (roundtrip run --device cuda -j $jobs)" "$out/run.log" \
    "$python" -m harness.cli run --device cuda --tier "$tier" -j "$jobs" --out "$out/parity"

if [ "$quick" != "--quick" ]; then
    leg "whole test suite on CUDA (pytest -n auto --device cuda)" "$out/pytest.log" \
        "$python" -m pytest -n auto --device cuda -p no:cacheprovider -rfE -q --junitxml="$out/junit.xml"
    failures_beyond_known "$out/junit.xml"
fi
echo "all legs done in $(( $(date +%s) - began )) s" | tee -a "$out/summary.txt"
pack
