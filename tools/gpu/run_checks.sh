#!/usr/bin/env bash
# Run the CUDA legs on a GPU machine: provider check, the test suite on CUDA, the full tier, the
# smoke tier per op on onnxruntime's CUDA and TensorRT providers.
# Usage: tools/gpu/run_checks.sh OUTDIR [--quick]
set -uo pipefail
out=${1:?usage: tools/gpu/run_checks.sh OUTDIR [--quick]}
quick=${2:-}
cd "$(dirname "$0")/../.."
mkdir -p "$out"
export PYTHONUNBUFFERED=1
site=/tmp/roundtrip-site

if ! ls .gpu-wheels/part-*/piece-* >/dev/null 2>&1; then
    echo "no .gpu-wheels/part-*/ folders: run tools/gpu/fetch_wheels.sh where there is network" >&2
    exit 2
fi
mkdir -p /tmp/roundtrip-wheels
cat $(ls .gpu-wheels/part-*/piece-* | sort -t/ -k3) | tar xf - -C /tmp/roundtrip-wheels
python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" /tmp/roundtrip-wheels/*.whl \
    > "$out/install.log" 2>&1 || { echo "wheel install failed; see $out/install.log" >&2; exit 3; }
export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}"

{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    python3 - <<'PY'
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
session = ort.InferenceSession(model.SerializeToString(), providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
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
python3 -m pytest -n auto --device cuda -q -p no:cacheprovider "${tests[@]}" \
    --junitxml="$out/junit.xml" --roundtrip-report-dir="$out/pytest-report" > "$out/pytest.log" 2>&1
echo "pytest exit $? in $(( $(date +%s) - start )) s" | tee -a "$out/summary.txt"
tail -3 "$out/pytest.log" | tee -a "$out/summary.txt"

start=$(date +%s)
python3 -m harness.cli run --device cuda --tier "$tier" --out "$out/parity" > "$out/run.log" 2>&1
echo "roundtrip run exit $? in $(( $(date +%s) - start )) s" | tee -a "$out/summary.txt"
tail -5 "$out/run.log" | tee -a "$out/summary.txt"

# The smoke tier on onnxruntime's CUDA and TensorRT providers, per op, against one fp64 truth: a
# provider this onnxruntime or machine lacks (TensorRT's libraries) is a named skip in the report.
start=$(date +%s)
python3 -m harness.cli run --device cuda --tier smoke --backend onnxruntime:provider=cuda \
    --backend onnxruntime:provider=tensorrt --out "$out/backends" > "$out/backends.log" 2>&1
echo "roundtrip run on onnxruntime:provider=cuda + onnxruntime:provider=tensorrt exit $? in $(( $(date +%s) - start )) s" \
    | tee -a "$out/summary.txt"
tail -3 "$out/backends.log" | tee -a "$out/summary.txt"
