#!/usr/bin/env bash
# Download onnxruntime-gpu for CPython 3.12 (and the small dependencies a GPU image may lack)
# and split the files into folders of at most 55 MiB: .gpu-wheels/part-1, part-2, ...
set -euo pipefail
cd "$(dirname "$0")/../.."
python=${PYTHON:-python3}
out=.gpu-wheels
rm -rf "$out" && mkdir -p "$out/download"
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64)
"$python" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    "${platforms[@]}" -d "$out/download" onnxruntime-gpu==1.31.1
# The GPU image has torch, onnx, numpy, matplotlib, jinja2, rich and pytest-xdist; bring only
# what it lacks (its own versions of the rest are used, not shadowed).
for pure in jsonschema jsonschema-specifications referencing rpds-py; do
    "$python" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        "${platforms[@]}" -d "$out/download" "$pure"
done
# One stream of every file, cut into 55 MiB pieces, one piece per folder.
(cd "$out/download" && tar cf ../bundle.tar ./*.whl)
rm -rf "$out/download"
split -b 55M -d -a 2 "$out/bundle.tar" "$out/piece-"
rm "$out/bundle.tar"
index=1
for piece in "$out"/piece-*; do
    mkdir -p "$out/part-$index" && mv "$piece" "$out/part-$index/"
    index=$((index + 1))
done
ls -l "$out"/part-*/
