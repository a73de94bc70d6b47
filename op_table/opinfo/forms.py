"""The forms OpInfo's samples reach an overload through, beside the entry's own op: kernel forms
(overloads torch.export never records from a public call, reached by calling them with the
public op's samples, adapted) and module forms (the recurrent layers, from PyTorch's ModuleInfo
database)."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

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
