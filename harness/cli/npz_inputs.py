"""`roundtrip verify model.onnx --inputs in.npz [--expected out.npz]`: the arrays checked against
the model's inputs and outputs before any case runs. A missing input, an array of another dtype,
rank or fixed size is a usage error naming the input, what the model declares and what the file
holds; expected outputs must name the model's outputs (or be all of them, in order)."""

from __future__ import annotations

import zipfile
from typing import Any

from harness.cli.errors import UsageError


def _declared(value: Any) -> tuple[Any, list[int | str | None]]:
    """(numpy dtype or None, dims: an int, a symbolic name, or None) of a graph input."""
    from onnx import helper

    tensor = value.type.tensor_type
    try:
        dtype = helper.tensor_dtype_to_np_dtype(tensor.elem_type) if tensor.elem_type else None
    except (KeyError, ValueError):
        dtype = None
    dims: list[int | str | None] = [
        d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tensor.shape.dim
    ]
    return dtype, dims


def _text(dtype: Any, dims: list[Any]) -> str:
    shown = ", ".join("?" if d is None else str(d) for d in dims)
    return f"{dtype if dtype is not None else 'any dtype'} [{shown}]"


def _mismatch(dtype: Any, dims: list[Any], has_shape: bool, array: Any) -> bool:
    if dtype is not None and array.dtype != dtype:
        return True
    if not has_shape:
        return False
    if array.ndim != len(dims):
        return True
    return any(isinstance(d, int) and d > 0 and d != size for d, size in zip(dims, array.shape))


def _load_model(model_path: str) -> Any:
    import onnx

    try:
        return onnx.load(model_path, load_external_data=False)
    except Exception:  # noqa: BLE001 - a bad model file is the case's finding, reported by the worker
        return None


def _arrays(npz_path: str, flag: str) -> dict[str, Any]:
    import numpy as np

    try:
        with np.load(npz_path, allow_pickle=False) as data:
            return {name: data[name] for name in data.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as error:
        raise UsageError(f"{flag} {npz_path}: not a readable .npz of arrays ({type(error).__name__}: {error}); "
                         "write one with numpy.savez(path, name=array, ...)") from None


def check_expected(model_path: str, npz_path: str, flag: str = "--expected") -> None:
    """UsageError unless the .npz at `npz_path` holds the model's outputs by name, or as many
    unnamed arrays (numpy.savez(path, a, b)) as it has outputs, in graph order."""
    model = _load_model(model_path)
    if model is None:
        return
    names = [value.name for value in model.graph.output]
    arrays = _arrays(npz_path, flag)
    if arrays and all(key.startswith("arr_") for key in arrays) and not set(arrays) & set(names):
        if len(arrays) != len(names):
            raise UsageError(f"{flag} {npz_path} holds {len(arrays)} unnamed array(s) for the model's {len(names)} "
                             f"output(s) {names}")
        return
    missing = [name for name in names if name not in arrays]
    unknown = sorted(set(arrays) - set(names))
    if missing or unknown:
        raise UsageError(f"{flag} {npz_path} must hold the model's outputs {names}: "
                         + "; ".join(part for part in (f"missing {missing}" if missing else "",
                                                       f"no output is named {unknown}" if unknown else "") if part))


def check_inputs(model_path: str, npz_path: str, flag: str = "--inputs") -> None:
    """UsageError unless the .npz at `npz_path` holds one array per input of the ONNX model at
    `model_path`, each of the declared dtype, rank and fixed sizes. A file that does not parse
    as a model is left to the verification, which reports it as the case's error."""
    model = _load_model(model_path)
    if model is None:
        return
    initializers = {t.name for t in model.graph.initializer}
    inputs = [value for value in model.graph.input if value.name not in initializers]
    arrays = _arrays(npz_path, flag)
    names = [value.name for value in inputs]
    if arrays and all(key.startswith("arr_") for key in arrays) and not set(arrays) & set(names):
        raise UsageError(f"{flag} {npz_path} holds unnamed arrays ({', '.join(sorted(arrays))}); name them after "
                         f"the model's inputs {names}: numpy.savez(path, {names[0] if names else 'x'}=array, ...)")
    for value in inputs:
        dtype, dims = _declared(value)
        has_shape = value.type.tensor_type.HasField("shape")
        if value.name not in arrays:
            raise UsageError(f"{flag} {npz_path} has no array for input {value.name!r} (the model expects "
                             f"{_text(dtype, dims)}); it holds {sorted(arrays) or 'nothing'}")
        array = arrays[value.name]
        if _mismatch(dtype, dims, has_shape, array):
            raise UsageError(f"{flag} {npz_path}: input {value.name!r} must be {_text(dtype, dims)}, the file "
                             f"holds {array.dtype} {list(array.shape)}")
    unknown = sorted(set(arrays) - set(names))
    if unknown:
        raise UsageError(f"{flag} {npz_path} holds {unknown}, which the model has no input of; its inputs are "
                         f"{names}")
