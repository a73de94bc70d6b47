#!/usr/bin/env bash
# Run the CUDA legs on a GPU machine: provider check, the test suite on CUDA, the full tier, the
# smoke tier per op on onnxruntime's CUDA and TensorRT providers.
# Usage: tools/gpu/run_checks.sh OUTDIR [--quick]     (PYTHON=... picks the interpreter; python3)
# Where something is missing (the wheels, the driver, a GPU, a provider) it says what and runs on:
# on a machine without a GPU every CUDA leg ends at once with the reason the harness gives.
set -uo pipefail
out=${1:?usage: tools/gpu/run_checks.sh OUTDIR [--quick]}
quick=${2:-}
python=${PYTHON:-python3}
cd "$(dirname "$0")/../.."
mkdir -p "$out"
export PYTHONUNBUFFERED=1
site=/tmp/roundtrip-site

if ls .gpu-wheels/part-*/piece-* >/dev/null 2>&1; then
    mkdir -p /tmp/roundtrip-wheels
    cat $(ls .gpu-wheels/part-*/piece-* | sort -t/ -k3) | tar xf - -C /tmp/roundtrip-wheels
    "$python" -m pip install -q --no-index --no-deps --no-compile --target "$site" /tmp/roundtrip-wheels/*.whl \
        > "$out/install.log" 2>&1 || { echo "wheel install failed; see $out/install.log" >&2; exit 3; }
    export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
    echo "no .gpu-wheels/part-*/ folders (tools/gpu/fetch_wheels.sh makes them where there is network):" \
         "running on this environment's onnxruntime" | tee "$out/install.log"
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi

{
    if command -v nvidia-smi >/dev/null; then
        nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    else
        echo "nvidia-smi: not found (no NVIDIA driver on this machine)"
    fi
    "$python" - <<'PY'
import json, platform
import numpy as np, onnx, onnxruntime as ort, torch
info = {"python": platform.python_version(), "torch": torch.__version__, "torch_cuda": torch.version.cuda,
        "onnx": onnx.__version__, "onnxruntime": ort.__version__, "providers": ort.get_available_providers(),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
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
info["matmul_max_abs_err"] = float(np.abs(session.run(None, {"a": a, "b": a})[0] - a @ a).max())
assignment = getattr(session, "get_provider_graph_assignment_info", None)
info["graph_assignment_api"] = assignment is not None
if assignment is not None:
    try:
        info["graph_assignment"] = str(assignment())
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
print(json.dumps(info, indent=1))
PY
} > "$out/environment.txt" 2>&1
cat "$out/environment.txt"

if [ "$quick" = "--quick" ]; then
    tests=(-m cuda)
    tier=smoke
else
    tests=()
    tier=full
fi
start=$(date +%s)
"$python" -m pytest -n auto --device cuda -q -p no:cacheprovider "${tests[@]}" \
    --junitxml="$out/junit.xml" --roundtrip-report-dir="$out/pytest-report" > "$out/pytest.log" 2>&1
echo "pytest exit $? in $(( $(date +%s) - start )) s" | tee -a "$out/summary.txt"
tail -3 "$out/pytest.log" | tee -a "$out/summary.txt"

start=$(date +%s)
"$python" -m harness.cli run --device cuda --tier "$tier" --out "$out/parity" > "$out/run.log" 2>&1
echo "roundtrip run exit $? in $(( $(date +%s) - start )) s" | tee -a "$out/summary.txt"
tail -5 "$out/run.log" | tee -a "$out/summary.txt"

# The smoke tier on onnxruntime's CUDA and TensorRT providers, per op, against one fp64 truth: a
# provider this onnxruntime or machine lacks (TensorRT's libraries) is a named skip in the report.
# Without a GPU the two providers follow onnxruntime on the CPU, so that the report names why each
# is skipped (--cases narrows it: ROUNDTRIP_GPU_CASES=small_conv_net).
start=$(date +%s)
if "$python" -c "import sys, torch; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then
    legs=(--device cuda)
else
    legs=(--device cpu --backend onnxruntime)
    echo "no CUDA device: the CUDA and TensorRT providers run after onnxruntime on the CPU, as named skips" \
        | tee -a "$out/summary.txt"
fi
"$python" -m harness.cli run "${legs[@]}" --tier smoke ${ROUNDTRIP_GPU_CASES:+--cases "$ROUNDTRIP_GPU_CASES"} \
    --backend onnxruntime:provider=cuda --backend onnxruntime:provider=tensorrt --out "$out/backends" \
    > "$out/backends.log" 2>&1
echo "roundtrip run on onnxruntime:provider=cuda + onnxruntime:provider=tensorrt exit $? in $(( $(date +%s) - start )) s" \
    | tee -a "$out/summary.txt"
tail -3 "$out/backends.log" | tee -a "$out/summary.txt"
"$python" - "$out/backends/parity.json" <<'PY' 2>/dev/null | tee -a "$out/summary.txt"
import json, sys
skipped = {result["backend"]: result["skipped"] for case in json.load(open(sys.argv[1]))["cases"]
           for result in (case.get("verification") or {}).get("backend_results", []) if result.get("skipped")}
for backend, why in sorted(skipped.items()):
    print(f"skipped {backend}: {why}")
PY
