#!/usr/bin/env bash
# Download onnxruntime-gpu for CPython 3.12 (and the small dependencies a GPU image may lack),
# unpack the wheels into one site folder, compress it with xz (the CUDA provider library shrinks
# from 284 MB to about 200 MB, where the wheel's own zip leaves 255 MB) and split the archive into
# folders of at most 52 MiB: .gpu-wheels/part-1, part-2, ...
set -euo pipefail
cd "$(dirname "$0")/../.."
python=${PYTHON:-python3}
out=.gpu-wheels
rm -rf "$out" && mkdir -p "$out/download" "$out/site"
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64)
"$python" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    "${platforms[@]}" -d "$out/download" onnxruntime-gpu==1.31.1
# The GPU image has torch, onnx, numpy, matplotlib, jinja2, rich and pytest-xdist; bring only
# what it lacks (its own versions of the rest are used, not shadowed).
for pure in jsonschema jsonschema-specifications referencing rpds-py expecttest; do
    "$python" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        "${platforms[@]}" -d "$out/download" "$pure"
done
# A wheel is a zip of its site-packages layout: unpacked side by side they are an importable folder.
for wheel in "$out"/download/*.whl; do
    "$python" -m zipfile -e "$wheel" "$out/site"
done
rm -rf "$out/download"
tar cf - -C "$out/site" . | xz -6 -T0 > "$out/site.tar.xz"
rm -rf "$out/site"
split -b 52M -d -a 2 "$out/site.tar.xz" "$out/piece-"
rm "$out/site.tar.xz"
index=1
for piece in "$out"/piece-*; do
    mkdir -p "$out/part-$index" && mv "$piece" "$out/part-$index/"
    index=$((index + 1))
done
ls -l "$out"/part-*/
