"""Run PyTorch's OpInfo samples against every ATen overload the registry claims; record the
results in docs/opinfo.json (tools/gen_op_table.py turns them into a column of OPERATORS.md).

For each registered overload, the candidate OpInfo entries of
`torch.testing._internal.common_methods_invocations.op_db` are those named after it (its ATen
name, or `nn.functional.<name>`, or an alias below). Each sample of a candidate, in float32 and
in float16, bfloat16 and int64 where the entry supports them, is captured alone; it counts for
the overload when the captured program holds that overload (a sample that torch routes to
another overload counts for that one, if it is registered and the entry is its candidate).
The sample is exported (opset `OPSET`), run on onnxruntime's CPU provider and compared with
torch: same dtype and shape, equal integers and bools, floats within the dtype's tolerance.

    python tools/opinfo_sweep.py                    # every overload, resumable, writes the JSON
    python tools/opinfo_sweep.py --only 'aten.add.*' --max-samples 4

tests/test_opinfo.py runs the same samples live: each entry must run as many samples as
recorded here, and each failure must be covered by an expectation of
tests/opinfo_expectations.py (scoped to entry, dtype and a predicate on the sample).
Samples are generated under a fixed seed (SAMPLE_SEED), so their values repeat across runs.
"""

from __future__ import annotations

import argparse
import fnmatch
import functools
import json
import logging
import re
import sys
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import torch
import torch.utils._pytree as pytree

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import exporter  # noqa: E402
from exporter.contract.fileio import write_text_atomic  # noqa: E402
from exporter.translate.registry import BUILTINS, DEFAULT_OPSET, normalize_target  # noqa: E402

RESULTS = ROOT / "docs" / "opinfo.json"
OPSET = DEFAULT_OPSET
DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int64)
SAMPLE_SEED = 0  # OpInfo's sample generators draw from torch's global RNG
MAX_SAMPLES = 12  # per entry and dtype: OpInfo lists up to ~50; the first ones are the varied ones
# (atol, rtol) per dtype: float32 as the op table; the half types at their precision
TOLERANCES = {torch.float32: (1e-5, 1e-4), torch.float16: (1e-3, 1e-2), torch.bfloat16: (1e-2, 2e-2)}

# OpInfo names for overloads whose own name is not an OpInfo entry's.
ALIASES: dict[str, tuple[str, ...]] = {
    "_adaptive_avg_pool2d": ("nn.functional.adaptive_avg_pool2d",),
    "_adaptive_avg_pool3d": ("nn.functional.adaptive_avg_pool3d",),
    "_log_softmax": ("log_softmax",),
    "_softmax": ("softmax",),
    "_native_batch_norm_legit_no_training": ("nn.functional.batch_norm",),
    "_native_batch_norm_legit": ("nn.functional.batch_norm",),
    "_pad_circular": ("nn.functional.pad",),
    "reflection_pad1d": ("nn.functional.pad",), "reflection_pad2d": ("nn.functional.pad",),
    "reflection_pad3d": ("nn.functional.pad",), "replication_pad1d": ("nn.functional.pad",),
    "replication_pad2d": ("nn.functional.pad",), "replication_pad3d": ("nn.functional.pad",),
    "constant_pad_nd": ("nn.functional.pad",),
    "_to_copy": ("to",), "_unsafe_view": ("view", "reshape"), "view": ("view", "reshape", "flatten"),
    "convolution": ("nn.functional.conv2d", "nn.functional.conv_transpose2d"),
    "copy": ("copy_",), "index": ("__getitem__",),
    "max_pool1d_with_indices": ("nn.functional.max_pool1d",),
    "max_pool2d_with_indices": ("nn.functional.max_pool2d",),
    "max_pool3d_with_indices": ("nn.functional.max_pool3d",),
    "upsample_nearest1d": ("nn.functional.interpolate",), "upsample_nearest2d": ("nn.functional.interpolate",),
    "upsample_nearest3d": ("nn.functional.interpolate",), "upsample_linear1d": ("nn.functional.interpolate",),
    "upsample_bilinear2d": ("nn.functional.interpolate", "nn.functional.upsample_bilinear"),
    "upsample_trilinear3d": ("nn.functional.interpolate",), "upsample_bicubic2d": ("nn.functional.interpolate",),
    "grid_sampler_2d": ("nn.functional.grid_sample",),
    "native_layer_norm": ("nn.functional.layer_norm",), "native_group_norm": ("nn.functional.group_norm",),
    "slice": ("__getitem__", "narrow"), "select": ("__getitem__", "select"),
    "embedding_renorm": ("nn.functional.embedding",),
    "clamp_min": ("clamp_min", "clamp"), "clamp_max": ("clamp_max", "clamp"),
    "full": ("full", "zeros", "ones", "new_full", "new_zeros", "new_ones"),
    "full_like": ("full_like", "zeros_like", "ones_like"),
    "arange": ("arange",), "max": ("max.reduction_no_dim", "max.reduction_with_dim", "max.binary"),
    "min": ("min.reduction_no_dim", "min.reduction_with_dim", "min.binary"),
    "_trilinear": ("nn.functional.bilinear",),
}

logger = logging.getLogger("opinfo_sweep")


# -- kernel forms: overloads that torch.export never records from OpInfo's calls ------------------
# torch.export keeps a public op whole (softmax, conv2d, x + 2 as add.Tensor), so some registered
# overloads (_softmax, convolution, add.Scalar, ...) arise only when code calls them directly, as
# decompositions and hand-written graphs do. Their samples are the OpInfo samples of the public op,
# passed to the kernel form: the same tensors, with a Python number taken from the sample's other
# operand (its first element) where the form takes a Scalar.


def _number(value: Any) -> Any:
    """A Python number from a sample operand: itself, or a tensor's first element (None if empty)."""
    if isinstance(value, torch.Tensor):
        return value.reshape(-1)[0].item() if value.numel() else None
    return value if isinstance(value, (int, float, bool)) else None


@dataclass(frozen=True)
class DirectCall:
    """An overload reached by calling it with the samples of `entries` (OpInfo names), adapted."""

    target: str
    entries: tuple[str, ...]
    adapt_fn: Any  # (input, args, kwargs) -> (op, input, args, kwargs) | None

    def adapt(self, sample_input: Any, args: tuple, kwargs: dict) -> tuple[Any, Any, tuple, dict] | None:
        try:
            return self.adapt_fn(sample_input, args, kwargs)
        except (IndexError, KeyError, TypeError, ValueError):
            return None  # a sample of another shape of call: not one for this form


def _scalar_binary(overload: Any, *, keep: Sequence[str] = ()) -> Any:
    """(tensor, tensor) samples as (tensor, number), keyword arguments named in `keep` kept."""
    def adapt(x, args, kwargs):
        other = _number(args[0])
        if not isinstance(x, torch.Tensor) or other is None or set(kwargs) - set(keep):
            return None
        return overload, x, (other,), {k: kwargs[k] for k in keep if k in kwargs}
    return adapt


def _softmax_kernel(overload: Any) -> Any:
    def adapt(x, args, kwargs):
        return (overload, x, (args[0], False), {}) if not kwargs and len(args) == 1 else None
    return adapt


def _convolution(x, args, kwargs):
    weight, bias = args[0], (args[1] if len(args) > 1 else kwargs.get("bias"))
    spatial = weight.dim() - 2
    stride, padding, dilation = (kwargs.get(k, d) for k, d in (("stride", 1), ("padding", 0), ("dilation", 1)))
    if isinstance(padding, str):
        return None
    expand = (lambda v: [v] * spatial if isinstance(v, int) else list(v))
    return (torch.ops.aten.convolution.default, x,
            (weight, bias, expand(stride), expand(padding), expand(dilation), False, [0] * spatial,
             kwargs.get("groups", 1)), {})


def _conv2d_padding(x, args, kwargs):
    weight, bias = args[0], (args[1] if len(args) > 1 else kwargs.get("bias"))
    padding = kwargs.get("padding", 0)
    if not isinstance(padding, str):
        return None
    expand = (lambda v: [v] * 2 if isinstance(v, int) else list(v))
    return (torch.ops.aten.conv2d.padding, x,
            (weight, bias, expand(kwargs.get("stride", 1)), padding, expand(kwargs.get("dilation", 1)),
             kwargs.get("groups", 1)), {})


def _adaptive_avg_pool(overload: Any) -> Any:
    def adapt(x, args, kwargs):
        size = args[0] if args else kwargs["output_size"]
        size = list(size) if isinstance(size, (tuple, list)) else [size] * (x.dim() - 2 if x.dim() > 3 else x.dim() - 1)
        return None if any(s is None for s in size) else (overload, x, (size,), {})
    return adapt


def _clamp(x, args, kwargs):
    low, high = (_number(v) for v in (args + (None, None))[:2])
    return None if low is None and high is None else (torch.ops.aten.clamp.default, x, (low, high), {})


def _clamp_one(overload: Any) -> Any:
    def adapt(x, args, kwargs):
        bound = _number(args[0]) if args else None
        return None if bound is None else (overload, x, (bound,), {})
    return adapt


def _pow_scalar(x, args, kwargs):
    base = _number(x)
    if base is None or not isinstance(args[0], torch.Tensor):
        return None
    return (lambda exponent, number: torch.ops.aten.pow.Scalar(number, exponent)), args[0], (base,), {}


def _nearest3d(x, args, kwargs):
    if x.dim() != 5 or kwargs.get("mode", "nearest") != "nearest":
        return None
    size, scale = (args[0] if args else kwargs.get("size")), kwargs.get("scale_factor")
    as_list = (lambda v, n: None if v is None else ([v] * n if isinstance(v, (int, float)) else list(v)))
    return (torch.ops.aten.upsample_nearest3d.vec, x, (as_list(size, 3), as_list(scale, 3)), {})


aten = torch.ops.aten
DIRECT_CALLS: tuple[DirectCall, ...] = (
    DirectCall("aten._softmax.default", ("softmax",), _softmax_kernel(aten._softmax.default)),
    DirectCall("aten._log_softmax.default", ("log_softmax",), _softmax_kernel(aten._log_softmax.default)),
    DirectCall("aten._adaptive_avg_pool2d.default", ("nn.functional.adaptive_avg_pool2d",),
               _adaptive_avg_pool(aten._adaptive_avg_pool2d.default)),
    DirectCall("aten._adaptive_avg_pool3d.default", ("nn.functional.adaptive_avg_pool3d",),
               _adaptive_avg_pool(aten._adaptive_avg_pool3d.default)),
    DirectCall("aten.convolution.default", ("nn.functional.conv1d", "nn.functional.conv2d", "nn.functional.conv3d"),
               _convolution),
    DirectCall("aten.conv2d.padding", ("nn.functional.conv2d",), _conv2d_padding),
    DirectCall("aten.alias.default", ("clone",), lambda x, args, kwargs: (aten.alias.default, x, (), {})),
    DirectCall("aten._unsafe_view.default", ("view",),
               lambda x, args, kwargs: (aten._unsafe_view.default, x, (list(args[0]),), {})),
    DirectCall("aten.copy.default", ("add",),  # (self, src) pairs; copy broadcasts src into self
               lambda x, args, kwargs: (aten.copy.default, x, (args[0],), {}) if not kwargs else None),
    DirectCall("aten.upsample_nearest3d.vec", ("nn.functional.interpolate.nearest",), _nearest3d),
    DirectCall("aten.native_dropout.default", ("nn.functional.dropout",),  # eval mode: deterministic
               lambda x, args, kwargs: (aten.native_dropout.default, x, (kwargs.get("p", 0.5), False), {})),
    DirectCall("aten.clamp.default", ("clamp",), _clamp),
    DirectCall("aten.clamp_min.default", ("clamp_min",), _clamp_one(aten.clamp_min.default)),
    DirectCall("aten.clamp_max.default", ("clamp_max",), _clamp_one(aten.clamp_max.default)),
    DirectCall("aten.pow.Scalar", ("pow",), _pow_scalar),
    DirectCall("aten.pow.Tensor_Scalar", ("pow",), _scalar_binary(aten.pow.Tensor_Scalar)),
    DirectCall("aten.div.Scalar_mode", ("div.trunc_rounding", "div.floor_rounding"),
               _scalar_binary(aten.div.Scalar_mode, keep=("rounding_mode",))),
    *(DirectCall(f"aten.{name}.Scalar", (entry,), _scalar_binary(getattr(aten, name).Scalar))
      for name, entry in (("add", "add"), ("sub", "sub"), ("mul", "mul"), ("div", "div.no_rounding_mode"),
                          ("eq", "eq"), ("ne", "ne"), ("lt", "lt"), ("le", "le"), ("gt", "gt"), ("ge", "ge"),
                          ("fmod", "fmod"), ("remainder", "remainder"))),
)
def _bucketize_scalar(x, args, kwargs):
    """bucketize(tensor, boundaries) samples with the tensor's first element as the Scalar."""
    number = _number(x)
    if number is None:
        return None
    return (lambda boundaries, value: aten.bucketize.Scalar(value, boundaries, **kwargs)), args[0], (number,), {}


def _searchsorted_scalar(x, args, kwargs):
    """searchsorted(sequence, values) samples with the values' first element as the Scalar."""
    number = _number(args[0])
    return None if number is None else (aten.searchsorted.Scalar, x, (number,), kwargs)


DIRECT_CALLS += (
    DirectCall("aten._unique.default", ("unique",),  # torch.unique records _unique2; _unique is its older form
               lambda x, args, kwargs: None if kwargs.get("dim") is not None or args else
               (aten._unique.default, x, (kwargs.get("sorted", True), kwargs.get("return_inverse", False)), {})),
    DirectCall("aten.bucketize.Scalar", ("bucketize",), _bucketize_scalar),
    DirectCall("aten.searchsorted.Scalar", ("searchsorted",), _searchsorted_scalar),
    DirectCall("aten.view_as_complex_copy.default", ("view_as_complex",),  # a functionalised program's spelling
               lambda x, args, kwargs: (aten.view_as_complex_copy.default, x, (), {})),
    DirectCall("aten.view_as_real_copy.default", ("view_as_complex",),  # OpInfo's complex samples are no dtype here
               lambda x, args, kwargs: (lambda t: aten.view_as_real_copy.default(aten.view_as_complex.default(t)), x, (), {})),
)
DIRECT_KEY_SEPARATOR = "@"


def direct_key(entry_key: str, target: str) -> str:
    """The results key of `target`'s kernel-form samples from `entry_key`: "softmax@aten._softmax.default"."""
    return f"{entry_key}{DIRECT_KEY_SEPARATOR}{target}"


# -- module forms: the recurrent layers ------------------------------------------------------------
# op_db has no entry for nn.LSTM, nn.GRU or nn.RNN (their ATen ops are only reached through the
# modules); PyTorch's ModuleInfo database (common_modules.module_db) has their samples: each
# builds the module (here from seed 0, in eval mode) and calls it on its forward inputs.

MODULE_TARGETS: dict[str, tuple[str, ...]] = {
    "LSTM": ("aten.lstm.input",), "GRU": ("aten.gru.input",), "RNN": ("aten.rnn_tanh.input", "aten.rnn_relu.input"),
}
MODULE_PREFIX = "module.nn."


def _call_module(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
    return module(*args, **kwargs)


@dataclass(frozen=True)
class ModuleEntry:
    """A ModuleInfo entry in the shape of an OpInfo one: each sample's `input` is the module
    (built from seed 0, eval mode), `args` and `kwargs` its forward inputs."""

    info: Any
    op: Any = _call_module
    variant_test_name: str = ""

    @property
    def name(self) -> str:
        return MODULE_PREFIX + self.info.module_cls.__name__

    def supported_dtypes(self, device: str) -> set[torch.dtype]:
        return set(self.info.dtypes)

    def sample_inputs(self, device: str, dtype: torch.dtype, requires_grad: bool = False) -> Iterable[Any]:
        from types import SimpleNamespace

        inputs = self.info.module_inputs_func(self.info, device=device, dtype=dtype, requires_grad=False,
                                              training=False)
        for module_input in inputs:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(0)
                module = self.info.module_cls(*module_input.constructor_input.args,
                                              **module_input.constructor_input.kwargs).to(dtype).eval()
            yield SimpleNamespace(input=module, args=tuple(module_input.forward_input.args),
                                  kwargs=dict(module_input.forward_input.kwargs))


@functools.cache
def module_entries() -> dict[str, ModuleEntry]:
    """results key ("module.nn.LSTM") -> its ModuleEntry."""
    from torch.testing._internal.common_modules import module_db

    entries = [ModuleEntry(info) for info in module_db if info.module_cls.__name__ in MODULE_TARGETS
               and info.module_cls.__module__.startswith("torch.nn")]
    return {entry.name: entry for entry in entries}


def resolve(key: str) -> tuple[Any, DirectCall | None]:
    """The OpInfo entry and kernel form (None for the entry's own op) a results key names."""
    if key.startswith(MODULE_PREFIX):
        return module_entries()[key], None
    entry_key, _, target = key.partition(DIRECT_KEY_SEPARATOR)
    entry = next(e for e in op_db() if _entry_key(e) == entry_key)
    call = next((c for c in DIRECT_CALLS if c.target == target), None) if target else None
    return entry, call


@functools.cache
def op_db() -> list[Any]:
    from torch.testing._internal.common_methods_invocations import op_db as database

    return list(database)


def _entry_key(entry: Any) -> str:
    return f"{entry.name}.{entry.variant_test_name}" if entry.variant_test_name else entry.name


def candidates(target: str) -> list[Any]:
    """The OpInfo entries whose samples may exercise `target` ("aten.add.Tensor")."""
    base = target.split(".")[1]
    names = {base, f"nn.functional.{base}", *ALIASES.get(base, ())}
    return [e for e in op_db() if e.name in names or e.aten_name == base or _entry_key(e) in names]


def sample_dtypes(entry: Any) -> list[torch.dtype]:
    supported = entry.supported_dtypes("cpu")
    return [dtype for dtype in DTYPES if dtype in supported]


class _Call(torch.nn.Module):
    """An OpInfo sample as a module: its tensors are the inputs, everything else is fixed."""

    def __init__(self, fn: Any, spec: pytree.TreeSpec, leaves: list[Any]) -> None:
        super().__init__()
        self.fn, self.spec, self.leaves = fn, spec, leaves
        # a ModuleInfo sample's module (a leaf) is registered, so its weights are the program's
        self.sample_modules = torch.nn.ModuleList([leaf for leaf in leaves if isinstance(leaf, torch.nn.Module)])

    def forward(self, *tensors: torch.Tensor) -> Any:
        supply = iter(tensors)
        leaves = [next(supply) if isinstance(leaf, torch.Tensor) else leaf for leaf in self.leaves]
        sample_input, args, kwargs = pytree.tree_unflatten(leaves, self.spec)
        return self.fn(sample_input, *args, **kwargs)


@dataclass
class Outcome:
    """One sample: the overloads it exercised, and whether it passed (else why not)."""

    targets: list[str]
    passed: bool
    reason: str = ""


def _detached(value: Any) -> Any:
    return pytree.tree_map_only(torch.Tensor, lambda t: t.detach().clone(), value)


def _outputs(value: Any) -> list[torch.Tensor] | None:
    leaves = pytree.tree_leaves(value)
    if not leaves or not all(isinstance(leaf, torch.Tensor) for leaf in leaves):
        return None
    return leaves


def _compare(got: np.ndarray, want: torch.Tensor, tolerance: tuple[float, float] | None = None) -> str:
    """"" when `got` is torch's `want`, else what differs. Floats are judged at `tolerance`
    ((rtol, atol), as torch_lib writes it) when given, else at the dtype's default."""
    from exporter.translate.dtypes import numpy_type

    if want.dtype.is_complex:  # the model's complex values are (..., 2) real pairs (exporter/translate/symbolics/fft.py)
        want = torch.view_as_real(want.resolve_conj())
    if want.dtype == torch.bfloat16:
        want_np = want.float().numpy()
        got = got.astype(np.float32) if got.dtype != np.float32 else got
    else:
        want_np = want.numpy()
        if got.dtype != numpy_type(want.dtype):
            return f"dtype {got.dtype}, torch gives {want.dtype}"
    if tuple(got.shape) != tuple(want_np.shape):
        return f"shape {tuple(got.shape)}, torch gives {tuple(want_np.shape)}"
    if want.dtype.is_floating_point:
        atol, rtol = TOLERANCES.get(want.dtype, TOLERANCES[torch.float32])
        if tolerance is not None:
            rtol, atol = tolerance
        a, b = got.astype(np.float64), want_np.astype(np.float64)
        close = np.isclose(a, b, atol=atol, rtol=rtol, equal_nan=True)
        if not close.all():
            finite = np.isfinite(a) & np.isfinite(b)
            worst = float(np.max(np.abs(a - b)[finite])) if finite.any() else float("nan")
            return f"values differ: {int((~close).sum())} of {close.size}, max abs {worst:.3g}"
        return ""
    return "" if np.array_equal(got, want_np) else "values differ (exact dtype)"


def run_sample(entry: Any, sample: Any, claimed: set[str], call: DirectCall | None = None,
               tolerance: tuple[float, float] | None = None) -> Outcome | None:
    """Export one sample and compare it with torch; None when the sample is not one for
    `claimed` (its program holds none of them) or returns no tensors. With `call`, the sample
    goes through that kernel form instead of the entry's own op (None if it does not fit).
    `tolerance`: the (rtol, atol) its float outputs are judged at instead of the default."""
    from op_table.table import program_targets

    op, sample_input, args, kwargs = entry.op, sample.input, tuple(sample.args), dict(sample.kwargs)
    if call is not None:
        adapted = call.adapt(sample_input, args, kwargs)
        if adapted is None:
            return None
        op, sample_input, args, kwargs = adapted
    leaves, spec = pytree.tree_flatten(_detached((sample_input, args, kwargs)))
    module = _Call(op, spec, leaves)
    tensors = [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]
    try:
        with torch.no_grad():
            expected = _outputs(module(*[t.clone() for t in tensors]))
    except Exception:  # the sample errors in torch itself (an error-input sample)
        return None
    if expected is None:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = exporter.capture(module, tuple(tensors))
    except Exception:  # torch.export cannot capture it: not the registry's to answer
        return None
    exercised = sorted(program_targets(program) & claimed)
    if not exercised:
        return None
    try:
        model = exporter.convert(program, opset_version=OPSET)
    except Exception as error:
        return Outcome(exercised, False, f"export: {' '.join(str(error).split())[:300]}")
    try:
        got, backend = run_model(model, tensors)
    except Exception as error:
        return Outcome(exercised, False, f"onnxruntime: {' '.join(str(error).split())[:300]}")
    if len(got) != len(expected):
        return Outcome(exercised, False, f"{len(got)} outputs, torch has {len(expected)}")
    for index, (actual, want) in enumerate(zip(got, expected)):
        problem = _compare(actual, want, tolerance)
        if problem:
            return Outcome(exercised, False, f"{backend}output {index}: {problem}")
    return Outcome(exercised, True, backend.rstrip(": "))


def run_model(model: Any, tensors: Sequence[torch.Tensor]) -> tuple[list[np.ndarray], str]:
    """The model's outputs on onnxruntime's CPU provider, and "" (the backend note).

    numpy has no bfloat16, so a bfloat16 model is fed OrtValues and its bfloat16 outputs are
    cast to float32 inside the graph (exact). onnxruntime's CPU provider has bfloat16 kernels
    for almost no operator (not even Add); where it has none, the model runs on
    `onnx.reference` (ml_dtypes bfloat16 arithmetic) and the note says so."""
    from exporter.translate.dtypes import to_numpy
    from harness.backend import prepare

    arrays = [to_numpy(t) for t in tensors]
    bfloat16 = onnx.TensorProto.BFLOAT16
    has_bfloat16 = any(t.dtype == torch.bfloat16 for t in tensors) or any(
        o.type.tensor_type.elem_type == bfloat16 for o in model.graph.output)
    if not has_bfloat16:
        return prepare(model, "CPU").run(arrays), ""
    try:
        return _run_bfloat16_on_onnxruntime(model, arrays), ""
    except Exception as error:
        missing = _NO_KERNEL.search(str(error))
        if missing is None:
            raise
    from onnx.reference import ReferenceEvaluator

    feeds = {i.name: a for i, a in zip(model.graph.input, arrays)}
    outputs = ReferenceEvaluator(model).run(None, feeds)
    note = f"onnx.reference (onnxruntime CPU has no bfloat16 kernel for {missing.group(1)}-{missing.group(2)}): "
    return [np.asarray(o) for o in outputs], note


def _run_bfloat16_on_onnxruntime(model: Any, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    graph_model = onnx.ModelProto()
    graph_model.CopyFrom(model)
    graph = graph_model.graph
    for output in graph.output:
        if output.type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16:
            widened = f"{output.name}__float32"
            graph.node.append(onnx.helper.make_node("Cast", [output.name], [widened], to=onnx.TensorProto.FLOAT))
            output.name = widened
            output.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    session = ort.InferenceSession(graph_model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {}
    for value, array in zip(graph.input, arrays):
        array = np.array(array, order="C", copy=True)  # (np.ascontiguousarray makes 0-d arrays 1-d)
        if value.type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16:
            feeds[value.name] = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
                array.view(np.uint16), onnx.TensorProto.BFLOAT16)
        else:
            feeds[value.name] = ort.OrtValue.ortvalue_from_numpy(array)
    return [value.numpy() for value in session.run_with_ort_values(None, feeds)]


def samples_of(entry: Any, dtype: torch.dtype, max_samples: int, call: DirectCall | None = None) -> list[Any]:
    """The samples the sweep runs: the entry's first `max_samples`; for a kernel form, every
    sample (its adapter skips those that do not fit, so the first ones may all be skipped); for
    a module, every sample (ModuleInfo lists few, and nn.RNN's tanh ones come after its relu ones)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SAMPLE_SEED)
        samples = list(entry.sample_inputs("cpu", dtype, requires_grad=False))
    return samples if call is not None or isinstance(entry, ModuleEntry) else samples[:max_samples]


def sweep_entry(entry: Any, claimed: set[str], max_samples: int, call: DirectCall | None = None,
                dtypes: Sequence[torch.dtype] | None = None) -> dict[str, Any]:
    """Every sample of one entry (through `call`, a kernel form, if given) in each of its
    dtypes: {dtype: [[index, targets, passed, reason]]}; a kernel form stops at `max_samples`
    samples that fit it."""
    results: dict[str, Any] = {}
    for dtype in sample_dtypes(entry):
        if dtypes is not None and dtype not in dtypes:
            continue
        rows = []
        try:
            samples = samples_of(entry, dtype, max_samples, call)
        except Exception as error:
            logger.warning("%s %s: no samples (%s)", _entry_key(entry), dtype, error)
            continue
        for index, sample in enumerate(samples):
            outcome = run_sample(entry, sample, claimed, call)
            if outcome is not None:
                rows.append([index, outcome.targets, outcome.passed, outcome.reason])
                if call is not None and len(rows) >= max_samples:
                    break
        results[str(dtype).removeprefix("torch.")] = rows
    return results


def registered_targets() -> list[str]:
    return [t for t in BUILTINS.targets() if t.startswith("aten.")]


def entries_for(targets: Iterable[str]) -> dict[str, tuple[Any, set[str]]]:
    """results key -> (entry, the overloads it is run for): the entries named after each
    overload, and for each kernel form, its entries keyed by `direct_key`."""
    targets = list(targets)
    table: dict[str, tuple[Any, set[str]]] = {}
    for target in targets:
        for entry in candidates(target):
            table.setdefault(_entry_key(entry), (entry, set()))[1].add(target)
    by_key = {_entry_key(e): e for e in op_db()}
    for call in DIRECT_CALLS:
        if call.target in targets:
            for name in call.entries:
                table[direct_key(name, call.target)] = (by_key[name], {call.target})
    for key, entry in module_entries().items():
        claimed = {t for t in MODULE_TARGETS[entry.info.module_cls.__name__] if t in targets}
        if claimed:
            table[key] = (entry, claimed)
    return table


def summarize(results: dict[str, Any]) -> dict[str, dict[str, list[int]]]:
    """overload -> dtype -> [passed, total], from the per-entry results."""
    summary: dict[str, dict[str, list[int]]] = {}
    for per_dtype in results.get("entries", {}).values():
        for dtype, rows in per_dtype.items():
            for _, targets, passed, _ in rows:
                for target in targets:
                    cell = summary.setdefault(target, {}).setdefault(dtype, [0, 0])
                    cell[0] += int(passed)
                    cell[1] += 1
    return summary


def load(path: Path = RESULTS) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.exists() else {"entries": {}}


def recorded_max_samples(results: dict[str, Any], key: str, dtype: str) -> int:
    """The sample limit `key` was last swept with. For entries recorded before the limit was
    kept per entry: one past the last recorded index in `dtype` (samples after it that reach
    no claimed overload are then not counted)."""
    limit = results.get("max_samples_of", {}).get(key)
    if limit is not None:
        return int(limit)
    indices = [row[0] for row in results["entries"].get(key, {}).get(dtype, [])]
    return max(indices) + 1 if indices else results.get("max_samples", MAX_SAMPLES)


def sweep(patterns: Sequence[str] | None, max_samples: int, redo: bool, path: Path = RESULTS,
          dtypes: Sequence[torch.dtype] | None = None) -> dict[str, Any]:
    """Run the sweep for the entries of the registered overloads matching `patterns`, saving
    after each entry. Each entry runs for every registered overload it reaches, not only the
    matching ones (an entry such as group_norm serves two). With `dtypes`, only those dtypes
    are run (again), merged into the recorded entries."""
    selected = {t for t in registered_targets() if not patterns or any(fnmatch.fnmatchcase(t, p) for p in patterns)}
    results = load(path)
    results.update(opset=OPSET, torch=torch.__version__)
    if not patterns:  # the default for entries without a limit of their own; a partial run records its own
        results["max_samples"] = max_samples
    for key, (entry, claimed) in sorted(entries_for(registered_targets()).items()):
        if not claimed & selected or (key in results["entries"] and not redo and dtypes is None):
            continue
        logger.info("%s (%s)", key, ", ".join(sorted(claimed)))
        _, call = resolve(key)
        measured = sweep_entry(entry, claimed, max_samples, call, dtypes)
        results["entries"][key] = {**results["entries"].get(key, {}), **measured}
        if dtypes is None:  # a limit per entry: every dtype of it ran at this one
            results.setdefault("max_samples_of", {})[key] = max_samples
        results["summary"] = summarize(results)
        write_text_atomic(path, json.dumps(results, indent=1, sort_keys=True) + "\n")
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="fnmatch patterns of overloads (aten.add.*), comma-separated")
    parser.add_argument("--max-samples", type=int, default=MAX_SAMPLES, help="samples per entry and dtype")
    parser.add_argument("--redo", action="store_true", help="run entries already recorded again")
    parser.add_argument("--dtypes", help="only these dtypes (float32,bfloat16,...), run again and merged")
    options = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    patterns = [p.strip() for p in options.only.split(",")] if options.only else None
    dtypes = [getattr(torch, d.strip()) for d in options.dtypes.split(",")] if options.dtypes else None
    sweep(patterns, options.max_samples, options.redo, dtypes=dtypes)
    return 0


# -- backend notes --------------------------------------------------------------------------

_NO_KERNEL = re.compile(r"Could not find an implementation for (\w+)\((\d+)\)")


if __name__ == "__main__":
    sys.exit(main())
