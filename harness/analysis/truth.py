"""fp64 truth per op: replay each FX node in float64 on torch's own inputs.

For FX node n, r(n) is n's ATen overload called on CPU in float64 with torch's own fp32 input
values for n (floats cast up exactly, everything else as recorded). Torch's fp32 output and the
backend's isolated output are both compared with r(n); harness.metrics.noise says who diverged.
Ops with random outputs (ATen's `nondeterministic_seeded` tag) get no truth; neither do ops
whose fp64 call fails. `reduction_length` gives the K of the noise bound.

The same replay on CPU in fp32 gives the per-op noise floor of a CUDA run: torch CPU against
torch CUDA on the same inputs, what two correct fp32 implementations disagree by.
"""

from __future__ import annotations

import contextlib
import math
import operator
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, NoReturn

import numpy as np
import torch
import torch.fx

from harness.metrics.arrays import as_array, largest_finite
from harness.metrics.comparison import Comparison, ComparisonInParts, compare
from harness.runtime.memory import release_freed_memory, reusing_freed_memory

# --- reduction length ----------------------------------------------------------------------


def _shape(value: Any) -> tuple[int, ...]:
    return tuple(value.shape) if isinstance(value, torch.Tensor) else ()


def _prod(items: Iterable[int]) -> int:
    return math.prod(int(i) for i in items)


def _conv_length(args: list[Any], transposed: bool, groups: int) -> int:
    weight = _shape(args[1])
    if len(weight) < 2:
        return 1
    channels = weight[0] // max(groups, 1) if transposed else weight[1]
    return channels * _prod(weight[2:])


def _arg(args: list[Any], index: int, default: Any) -> Any:
    return args[index] if len(args) > index and args[index] is not None else default


_REDUCTION_RULES: dict[str, Any] = {
    "conv1d": lambda a: _conv_length(a, False, _arg(a, 6, 1)),
    "conv2d": lambda a: _conv_length(a, False, _arg(a, 6, 1)),
    "conv3d": lambda a: _conv_length(a, False, _arg(a, 6, 1)),
    "convolution": lambda a: _conv_length(a, bool(_arg(a, 6, False)), _arg(a, 8, 1)),
    "_convolution": lambda a: _conv_length(a, bool(_arg(a, 6, False)), _arg(a, 8, 1)),
    "conv_transpose1d": lambda a: _conv_length(a, True, _arg(a, 6, 1)),
    "conv_transpose2d": lambda a: _conv_length(a, True, _arg(a, 6, 1)),
    "conv_transpose3d": lambda a: _conv_length(a, True, _arg(a, 6, 1)),
    "linear": lambda a: _shape(a[1])[-1] if _shape(a[1]) else 1,
    "mm": lambda a: _shape(a[0])[-1],
    "bmm": lambda a: _shape(a[0])[-1],
    "matmul": lambda a: _shape(a[0])[-1] if _shape(a[0]) else 1,
    "addmm": lambda a: _shape(a[1])[-1],
    "baddbmm": lambda a: _shape(a[1])[-1],
    "addbmm": lambda a: _shape(a[1])[-1] * _shape(a[1])[0],
    "_softmax": lambda a: _shape(a[0])[a[1]] if _shape(a[0]) else 1,
    "softmax": lambda a: _shape(a[0])[a[1]] if _shape(a[0]) else 1,
    "_log_softmax": lambda a: _shape(a[0])[a[1]] if _shape(a[0]) else 1,
    "log_softmax": lambda a: _shape(a[0])[a[1]] if _shape(a[0]) else 1,
    "layer_norm": lambda a: _prod(a[1]),
    "native_layer_norm": lambda a: _prod(a[1]),
    "avg_pool1d": lambda a: _prod(a[1]) if isinstance(a[1], (list, tuple)) else int(a[1]),
    "avg_pool2d": lambda a: _prod(a[1]) if isinstance(a[1], (list, tuple)) else int(a[1]) ** 2,
    "avg_pool3d": lambda a: _prod(a[1]) if isinstance(a[1], (list, tuple)) else int(a[1]) ** 3,
    "cumsum": lambda a: _shape(a[0])[a[1]] if _shape(a[0]) else 1,
    "scaled_dot_product_attention": lambda a: _shape(a[0])[-1] + _shape(a[1])[-2],
    "_scaled_dot_product_flash_attention_for_cpu": lambda a: _shape(a[0])[-1] + _shape(a[1])[-2],
}


def reduction_length(node: torch.fx.Node, args: list[Any], output: Any) -> int:
    """How many terms each output element of `node` sums (1 for element-wise ops).

    Ops with a known structure (convolution, matrix products, softmax, normalisation, pooling)
    have a rule; any other op is taken to reduce its largest input onto its output.
    """
    name = getattr(getattr(node.target, "overloadpacket", None), "__name__", str(node.target))
    rule = _REDUCTION_RULES.get(name)
    if rule is not None:
        try:
            return max(int(rule(args)), 1)
        except (IndexError, TypeError, ValueError):
            pass
    first = output[0] if isinstance(output, (tuple, list)) and output else output
    out_numel = first.numel() if isinstance(first, (torch.Tensor, TruthInSlices)) else 1
    in_numel = max((a.numel() for a in _tensors(args)), default=1)
    return max(in_numel // max(out_numel, 1), 1)


_CELL_ROUNDINGS = {"lstm": 6, "gru": 7, "rnn_tanh": 2, "rnn_relu": 2}
"""Results rounded one after another in one step of a recurrent cell, from the step's inputs to
its new hidden state. LSTM: the gates' sum, their activations, f*c and i*g, c' = their sum,
tanh(c'), h' = o*tanh(c'). GRU: the gates' sum, sigmoid, r*(U h + b), + W x, tanh, (1-z)*n and
z*h, their sum. Elman RNN: the sum and its activation."""


def cell_roundings(node: torch.fx.Node) -> int:
    """How many roundings one output element of `node` goes through in sequence: the chain of one
    step of a recurrent cell (`_CELL_ROUNDINGS`), else 1. torch rounds the cell's results in its
    own dtype too, so at the declared precision its error already holds them; the verdict counts
    them where a runtime computes the cell in a lower precision than torch (OpenVINO's bfloat16 LSTM
    rounds every one of them to bfloat16: on word_language_model_lstm its error is 0.00605 of the
    output's scale, and an emulation rounding each of the six to bfloat16 gives 0.0045-0.0063 on
    the three outputs; one rounding would allow 0.00586). Errors carried over from earlier steps
    decay through the gates and are not counted."""
    name = getattr(getattr(node.target, "overloadpacket", None), "__name__", "")
    return _CELL_ROUNDINGS.get(name, 1)


def _tensors(items: Any) -> Iterable[torch.Tensor]:
    if isinstance(items, torch.Tensor):
        yield items
    elif isinstance(items, (list, tuple)):
        for item in items:
            yield from _tensors(item)


# --- replay --------------------------------------------------------------------------------


def _quantize_exact(input: torch.Tensor, scale: Any, zero_point: Any, quant_min: int, quant_max: int,
                    dtype: torch.dtype, axis: int | None = None) -> torch.Tensor:
    """torch's quantize (clamp(round(x / scale) + zero_point, quant_min, quant_max), half to
    even) computed in the input's own float dtype: in float64 it rounds the exact quotient, where
    torch's float32 kernel rounds x * fl(1 / scale) (one step apart at most, at a tie)."""
    scale = torch.as_tensor(scale, dtype=input.dtype).reshape(-1)
    zero_point = torch.as_tensor(zero_point, dtype=input.dtype).reshape(-1)
    if axis is not None:
        shape = [1] * input.dim()
        shape[axis] = -1
        scale, zero_point = scale.reshape(shape), zero_point.reshape(shape)
    else:
        scale, zero_point = scale.reshape(()), zero_point.reshape(())
    return torch.clamp(torch.round(input / scale) + zero_point, quant_min, quant_max).to(dtype)


def _quantize_per_tensor(input: torch.Tensor, scale: Any, zero_point: Any, quant_min: Any, quant_max: Any,
                         dtype: torch.dtype) -> torch.Tensor:
    return _quantize_exact(input, scale, zero_point, int(quant_min), int(quant_max), dtype)


def _quantize_per_channel(input: torch.Tensor, scales: Any, zero_points: Any, axis: int, quant_min: int,
                          quant_max: int, dtype: torch.dtype) -> torch.Tensor:
    return _quantize_exact(input, scales, zero_points, quant_min, quant_max, dtype, axis % input.dim())


def _choose_qparams_in_float32(target: Any) -> Any:
    """A dynamic quantization's parameter choice, made on the float32 value as torch makes it
    (the scale is a choice, not an approximation of a real number)."""
    def call(input: torch.Tensor, *args: Any) -> Any:
        return target(input.to(torch.float32), *args)

    return call


_FLOAT64_FORMS = {
    "quantized_decomposed.quantize_per_tensor.default": _quantize_per_tensor,
    "quantized_decomposed.quantize_per_tensor.tensor": _quantize_per_tensor,
    "quantized_decomposed.quantize_per_tensor.tensor2": _quantize_per_tensor,
    "quantized_decomposed.quantize_per_channel.default": _quantize_per_channel,
}
"""Ops whose kernels accept float32 only, as the same definition on float64 inputs."""
_CHOSEN_IN_FLOAT32 = frozenset({"quantized_decomposed.choose_qparams.tensor",
                                "quantized_decomposed.choose_qparams_symmetric.tensor"})


def replay_target(node: torch.fx.Node) -> Any:
    """What replaying `node` calls: its target, or the float64 form of an op whose kernel
    takes float32 only (PT2E's quantize: the truth of a quantized value is the float value
    rounded by the same definition), used when the value reaching it is float64."""
    form = _FLOAT64_FORMS.get(str(node.target))
    if str(node.target) in _CHOSEN_IN_FLOAT32:
        form = _choose_qparams_in_float32(node.target)
    if form is None:
        return node.target

    def call(*args: Any, **kwargs: Any) -> Any:
        if isinstance(args[0], torch.Tensor) and args[0].dtype == torch.float64:
            return form(*args, **kwargs)
        return node.target(*args, **kwargs)

    return call


def no_truth_reason(node: torch.fx.Node) -> str:
    """Why `node` gets no fp64 truth, or '' when it does."""
    tags = getattr(node.target, "tags", ())
    if torch.Tag.nondeterministic_seeded in tags and not _inference_only(node):
        return "random op (nondeterministic_seeded): no deterministic fp64 truth"
    if not callable(node.target):
        return f"{node.target!r} is not callable"
    return ""


def _inference_only(node: torch.fx.Node) -> bool:
    """Whether a seeded op draws no random numbers here: its `train` argument is False (an RNN or
    dropout in eval mode), or its `dropout_p` is 0 (attention without dropout)."""
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return False
    for index, argument in enumerate(schema.arguments):
        if argument.name in ("train", "dropout_p"):
            default = argument.default_value if argument.has_default_value() else None
            value = node.kwargs.get(argument.name, node.args[index] if index < len(node.args) else default)
            return value is False if argument.name == "train" else value == 0
    return False


class OpCallFailed(RuntimeError):
    """The replayed op itself raised (e.g. an overload without a float64 kernel): a finding about
    torch, unlike an error of the replay's own code, which propagates as it is."""

    def __init__(self, node: torch.fx.Node, error: Exception) -> None:
        super().__init__(f"{type(error).__name__}: {error}")
        self.node = node
        self.error = error


class SliceDefect(RuntimeError):
    """A sliced replay (Replayer) made inputs torch's kernel refuses although it runs the whole
    call: an error of the replay's own code, which propagates."""


SLICED_BYTES = 48 * 2**20
"""A layer whose fp64 weight or unfolded input would be larger is replayed in slices (Replayer).
Above glibc's largest mmap threshold (32 MiB), so each slice's buffers are mapped and unmapped
rather than left in the heap, and the heaps are trimmed after a sliced layer."""

# ops the Replayer may slice: kind, and the index of their `groups` argument (sliced only at 1)
_SLICEABLE: dict[str, tuple[str, int | None]] = {
    "aten.linear.default": ("linear", None),
    "aten.conv1d.default": ("conv", 6),
    "aten.conv2d.default": ("conv", 6),
    "aten.conv3d.default": ("conv", 6),
    "aten.convolution.default": ("conv", 8),
}


EXACT_POINTWISE = frozenset({
    "aten.add.Tensor", "aten.sub.Tensor", "aten.mul.Tensor", "aten.div.Tensor", "aten.where.self",
    "aten.relu.default", "aten.neg.default", "aten.abs.default", "aten.maximum.default", "aten.minimum.default",
    "aten.clamp.default", "aten.clamp_min.default", "aten.clamp_max.default",
})
"""Element-wise ops the Replayer may replay in slices of their first dimension (without keyword
arguments: `add`'s alpha may fuse into a multiply-add): each output element is its inputs'
elements rounded once by IEEE arithmetic, or selected, so it is the same bits wherever the
tensor is cut (a transcendental function's vectorised and scalar paths may differ in the last
bit, so none is listed). Detectors paste their masks with such ops on 100 x 600 x 800 values:
whole, each one's float64 inputs and output take GBs at once."""


class TruthInSlices:
    """The replayed output of an `EXACT_POINTWISE` op too large to hold whole in float64, made
    one slice of its first dimension at a time as it is read (`slices()`, again at each reading:
    an element-wise op's slice costs one pass over its inputs' rows). Each slice holds the bits
    the whole replay holds there; `whole()` assembles them. Comparisons with it are made slice
    by slice and merged (harness.metrics.comparison.ComparisonInParts), so the verification of
    a detector's mask paste ([100, 600, 800]: 366 MiB in float64) never holds its truth whole.
    Torch's kernel refusing a slice raises as the whole replay would (OpCallFailed, or
    SliceDefect when the whole call runs)."""

    def __init__(self, shape: torch.Size, rows: int, make: Callable[[int, int], torch.Tensor]) -> None:
        self.shape = torch.Size(shape)
        self.rows = rows
        self._make = make

    def numel(self) -> int:
        return self.shape.numel()

    def slices(self) -> Iterator[tuple[int, int, torch.Tensor]]:
        """(start, stop, the truth of rows start:stop) from the first row to the last."""
        for start in range(0, self.shape[0], self.rows):
            stop = min(start + self.rows, self.shape[0])
            yield start, stop, self._make(start, stop)

    def whole(self) -> torch.Tensor:
        """The truth assembled whole (where a caller needs it as one tensor)."""
        total = None
        for start, stop, part in self.slices():
            if total is None:
                total = part.new_empty(tuple(self.shape))
            total[start:stop].copy_(part)  # the same shape: the sliced inputs carry the output's first dimension
        return total


def compare_with_truth(sides: Sequence[np.ndarray], truth: Any, *, atol: float, rtol: float,
                       name: str = "") -> list[Comparison]:
    """Each of `sides` compared with the replayed `truth` (dtypes not checked): `compare` on a
    tensor; on a TruthInSlices, slice by slice, each slice made once for every side and the
    parts merged (ComparisonInParts), the same comparisons field by field."""
    if not isinstance(truth, TruthInSlices):
        expected = as_array(truth)
        return [compare(side, expected, atol=atol, rtol=rtol, name=name, check_dtype=False) for side in sides]
    parts: list[ComparisonInParts] = []
    for start, stop, piece in truth.slices() if sides else ():
        expected = as_array(piece)
        if not parts:
            parts = [ComparisonInParts(side.shape, side.dtype, tuple(truth.shape), expected.dtype, atol=atol,
                                       rtol=rtol, name=name, check_dtype=False) for side in sides]
        for side, part in zip(sides, parts):
            if part.compares_values:
                part.add(side[start:stop], expected)
        del piece, expected
    return [part.result() for part in parts]


def truth_largest_finite(truth: Any) -> float:
    """The largest finite magnitude of a replayed truth (a TruthInSlices read slice by slice)."""
    if isinstance(truth, TruthInSlices):
        return max(largest_finite(as_array(piece)) for _, _, piece in truth.slices())
    return largest_finite(as_array(truth))


class Float64Weights:
    """The float64 copies of a program's parameters and buffers, made once for every fp64 pass
    of one verification (the outputs' truth, then each op's), within `budget` bytes: a
    parameter converted while the copies held fit is kept, the others are converted by each
    pass as before (a large layer in slices). Converting is exact, so a kept copy is the value
    each pass would make."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.held = 0
        self._copies: dict[str, torch.Tensor] = {}

    def get(self, name: str) -> torch.Tensor | None:
        """The kept copy of parameter `name`, or None."""
        return self._copies.get(name)

    def admits(self, value: Any) -> bool:
        """Whether a float tensor's float64 copy fits beside those held."""
        return (isinstance(value, torch.Tensor) and value.is_floating_point() and value.layout == torch.strided
                and self.held + value.numel() * 8 <= self.budget)

    def keep(self, name: str, copy: torch.Tensor) -> None:
        self._copies[name] = copy
        self.held += copy.numel() * copy.element_size()

    def clear(self) -> None:
        """Drop every copy (once the last fp64 pass is done)."""
        self._copies.clear()
        self.held = 0


class Replayer:
    """Call FX nodes' targets on recorded inputs moved to `device` and, for floats, `dtype`.

    Converted inputs are cached and released after their last consumer among `nodes`, so a
    whole model's replay holds at most the live fp64 copies; with `weights` (Float64Weights,
    float64 on CPU only), the parameters' and buffers' copies come from there, made once for
    every pass of the verification. `in_slices`: a large `EXACT_POINTWISE` op's output is a
    TruthInSlices, for a caller that compares it slice by slice, rather than one whole tensor.
    """

    def __init__(self, nodes: Iterable[torch.fx.Node], values: dict[str, Any], *, device: str = "cpu",
                 dtype: torch.dtype | None = torch.float64, weights: Float64Weights | None = None,
                 in_slices: bool = False) -> None:
        self.values = values
        self.device = torch.device(device)
        self.dtype = dtype
        self.in_slices = in_slices
        self.weights = weights if dtype == torch.float64 and self.device.type == "cpu" else None
        self._remaining: Counter[str] = Counter()
        for node in nodes:
            self._remaining.update(n.name for n in node.all_input_nodes)
        self._cache: dict[str, Any] = {}

    def inputs(self, node: torch.fx.Node) -> tuple[list[Any], dict[str, Any]]:
        """The node's args (schema order, as recorded) and kwargs, converted."""
        args = torch.fx.node.map_arg(node.args, self._convert)
        kwargs = torch.fx.node.map_arg(node.kwargs, self._convert)
        if "device" in kwargs and kwargs["device"] is not None:
            kwargs = {**kwargs, "device": self.device}
        return list(args), dict(kwargs)

    def __call__(self, node: torch.fx.Node) -> tuple[Any, list[Any]]:
        """(the node's output replayed, the converted args it was called with). OpCallFailed
        when the op itself raises; the replay's own errors propagate unchanged.

        A linear whose converted weight, or a convolution whose converted weight or unfolded
        input would exceed `SLICED_BYTES`, is computed in slices (linear: of its output
        features; convolution: of its input channels, image by image, the partial results
        summed), each slice converted alone; its args then hold the weight unconverted (same shape). So replaying
        a large layer in fp64 never holds a whole fp64 copy of its weight or of its unfolded
        input. A convolution whose images each unfold within `SLICED_BYTES` but not all of them
        together (torch's float64 kernel unfolds the whole batch at once: 345 MiB for a detector's
        mask head, 100 regions of 256 x 14 x 14) runs on groups of images, each image computed as
        in the whole call, so the output is the same bits. Likewise an `EXACT_POINTWISE` op whose float64 inputs would exceed `SLICED_BYTES`
        is computed in slices of its first dimension into its whole output, or with `in_slices`
        returned as a TruthInSlices (its args then hold torch's values unconverted)."""
        try:
            layout = self._sliced_layout(node)
            images = 0 if layout is not None else self._images_per_call(node)
            rows = 0 if layout is not None or images else self._pointwise_rows(node)
            if layout is not None or images or rows:
                try:
                    if layout is not None:
                        return self._call_in_slices(node, *layout)
                    return self._call_in_images(node, images) if images else self._call_pointwise_in_slices(node, rows)
                except OpCallFailed as refused:
                    self._judge_refused_slice(node, refused)
            args, kwargs = self.inputs(node)
            try:
                with torch.no_grad():
                    return replay_target(node)(*args, **kwargs), args
            except Exception as error:  # torch's kernel refused these inputs
                raise OpCallFailed(node, error) from error
        finally:
            self._release(node)

    def _judge_refused_slice(self, node: torch.fx.Node, refused: OpCallFailed,
                             whole_call: tuple[list[Any], dict[str, Any]] | None = None) -> NoReturn:
        """Torch's kernel refused a slice the replay made: a finding about torch (OpCallFailed)
        only when it refuses the whole call too; when the whole call runs, the slices were
        inputs torch cannot take, a defect of the slicing (SliceDefect), never a verdict.
        `whole_call`: the converted (args, kwargs), when the replay's cache let them go."""
        args, kwargs = self.inputs(node) if whole_call is None else whole_call
        try:
            with torch.no_grad():
                replay_target(node)(*args, **kwargs)
        except Exception as error:  # torch's kernel refused the whole call as well
            raise OpCallFailed(node, error) from error
        raise SliceDefect(f"the fp64 replay of {node.name} in slices failed where the whole call runs: "
                          f"{refused}") from refused.error

    def _sliced_layout(self, node: torch.fx.Node) -> tuple[int, int, int] | None:
        """(slices, weight dim sliced, number of features) when `node` should run in slices."""
        layout = _SLICEABLE.get(str(node.target))
        if layout is None or self.dtype is None or node.kwargs:
            return None
        kind, groups_index = layout
        args = node.args
        if len(args) < 2 or not isinstance(args[1], torch.fx.Node) or not isinstance(args[0], torch.fx.Node):
            return None
        if groups_index is not None and len(args) > groups_index and args[groups_index] not in (1, None):
            return None
        if str(node.target) == "aten.convolution.default" and len(args) > 6 and args[6]:
            return None  # transposed
        weight, output = self.values.get(args[1].name), self.values.get(node.name)
        if not isinstance(weight, torch.Tensor) or not weight.is_floating_point() or weight.dim() < 2:
            return None
        itemsize = torch.empty((), dtype=self.dtype).element_size()
        needed = 0 if self._kept(args[1]) else weight.numel() * itemsize  # a kept copy is made once, whole
        if kind == "conv" and isinstance(output, torch.Tensor) and output.dim() == weight.dim():
            spatial = output.numel() // max(output.shape[0] * output.shape[1], 1)
            needed = max(needed, weight[0].numel() * spatial * itemsize)  # im2col of one image
        if needed <= SLICED_BYTES:
            return None
        dim = 0 if kind == "linear" else 1
        features = weight.shape[dim]
        slices = min(features, -(-needed // SLICED_BYTES))
        return slices, dim, features

    def _images_per_call(self, node: torch.fx.Node) -> int:
        """Images per call when `node` is a convolution (not transposed, any groups) whose whole
        batch's unfolded input in float64 would exceed `SLICED_BYTES` (0: replay it whole)."""
        layout = _SLICEABLE.get(str(node.target))
        if layout is None or layout[0] != "conv" or self.dtype is None or node.kwargs or len(node.args) < 2:
            return 0
        if str(node.target) == "aten.convolution.default" and len(node.args) > 6 and node.args[6]:
            return 0  # transposed
        weight = self.values.get(getattr(node.args[1], "name", None))
        output = self.values.get(node.name)
        if (not isinstance(weight, torch.Tensor) or not isinstance(output, torch.Tensor) or weight.dim() < 3
                or output.dim() != weight.dim() or output.shape[0] < 2):
            return 0
        spatial = output.numel() // max(output.shape[0] * output.shape[1], 1)
        per_image = weight[0].numel() * spatial * torch.empty((), dtype=self.dtype).element_size()
        if per_image * output.shape[0] <= SLICED_BYTES:
            return 0
        return max(1, SLICED_BYTES // max(per_image, 1))

    def _call_in_images(self, node: torch.fx.Node, images: int) -> tuple[Any, list[Any]]:
        args, kwargs = self.inputs(node)
        x, total = args[0], None
        with torch.no_grad():
            for start in range(0, x.shape[0], images):
                stop = min(start + images, x.shape[0])
                args[0] = x[start:stop]
                try:
                    part = node.target(*args, **kwargs)
                except Exception as error:  # torch's kernel refused these inputs
                    raise OpCallFailed(node, error) from error
                if total is None:
                    total = part.new_empty((x.shape[0], *part.shape[1:]))
                total[start:stop].copy_(part)
                del part
        args[0] = x
        release_freed_memory()
        return total, args

    def _call_in_slices(self, node: torch.fx.Node, slices: int, dim: int, features: int) -> tuple[Any, list[Any]]:
        weight = self.values[node.args[1].name]
        bias_node = node.args[2] if len(node.args) > 2 else None
        bias = self.values.get(bias_node.name) if isinstance(bias_node, torch.fx.Node) else None
        args = list(torch.fx.node.map_arg(
            tuple(None if i in (1, 2) else a for i, a in enumerate(node.args)), self._convert))
        x = args[0]
        per_slice = -(-features // slices)
        pieces, total = [], None

        def kernel() -> Any:  # only torch's own call is a finding about torch; the slicing's errors propagate
            try:
                return node.target(*args)
            except Exception as error:  # torch's kernel refused these inputs
                raise OpCallFailed(node, error) from error

        with torch.no_grad():
            for start in range(0, features, per_slice):
                stop = min(start + per_slice, features)
                args[1] = _convert(weight.narrow(dim, start, stop - start), self.device, self.dtype)
                if dim == 0:  # linear: a slice of output features, with its bias
                    if len(args) > 2:
                        args[2] = None if bias is None else _convert(bias[start:stop], self.device, self.dtype)
                    pieces.append(kernel())
                else:  # convolution: a slice of input channels, summed, one image at a time
                    if len(args) > 2:
                        args[2] = None
                    for image in range(x.shape[0]):
                        args[0] = x[image:image + 1].narrow(1, start, stop - start)
                        part = kernel()
                        if total is None:
                            total = part.new_zeros((x.shape[0], *part.shape[1:]))
                        total[image:image + 1].add_(part)
                        del part
            if dim == 0:
                total = torch.cat(pieces, dim=-1)
            elif bias is not None:
                shape = [1, -1] + [1] * (total.dim() - 2)
                total.add_(_convert(bias, self.device, self.dtype).reshape(shape))
        args[0], args[1] = x, weight
        if len(args) > 2:
            args[2] = bias
        release_freed_memory()
        return total, args

    def _pointwise_rows(self, node: torch.fx.Node) -> int:
        """Rows of the first dimension per slice when `node` is an EXACT_POINTWISE op whose
        float64 inputs, not converted yet, would exceed `SLICED_BYTES` (0: replay it whole).
        Only the inputs of the output's rank and first dimension are sliced; the others (broadcast
        along it, scalars) are converted whole."""
        if self.dtype is None or node.kwargs or str(node.target) not in EXACT_POINTWISE:
            return 0
        output = self.values.get(node.name)
        if not isinstance(output, torch.Tensor) or output.dim() == 0 or output.shape[0] < 2:
            return 0
        itemsize = torch.empty((), dtype=self.dtype).element_size()
        sliced = self._sliced_inputs(node, output)
        needed = sum(self.values.get(name).numel() * itemsize for name in sliced if name not in self._cache)
        if needed <= SLICED_BYTES:
            return 0
        per_row = (needed + output.numel() * itemsize) // output.shape[0]
        return max(1, SLICED_BYTES // max(per_row, 1))

    def _sliced_inputs(self, node: torch.fx.Node, output: torch.Tensor) -> set[str]:
        """The inputs of `node` that are tensors of `output`'s rank and first dimension."""
        found = set()
        for input_node in node.all_input_nodes:
            value = self.values.get(input_node.name)
            if (isinstance(value, torch.Tensor) and value.layout == torch.strided and value.dim() == output.dim()
                    and value.shape[0] == output.shape[0]):
                found.add(input_node.name)
        return found

    def _call_pointwise_in_slices(self, node: torch.fx.Node, rows: int) -> tuple[Any, list[Any]]:
        output = self.values.get(node.name)
        sliced = self._sliced_inputs(node, output)
        whole = {n.name: self._convert(n) for n in node.all_input_nodes if n.name not in sliced}
        # torch's values, or their conversions made whole for another reader: held by the slices' maker
        held = {name: self._cache.get(name, self.values.get(name)) for name in sliced}
        converted = {name for name in sliced if name in self._cache}
        target = replay_target(node)

        def piece(input_node: torch.fx.Node, start: int, stop: int) -> Any:
            name = input_node.name
            if name not in sliced:
                return whole[name]
            if name in converted:
                return held[name][start:stop]
            return _convert(held[name][start:stop], self.device, self.dtype)

        def make(start: int, stop: int) -> torch.Tensor:
            args = torch.fx.node.map_arg(node.args, lambda n: piece(n, start, stop))
            try:
                with torch.no_grad():
                    return target(*args)
            except Exception as error:  # torch's kernel refused these inputs
                refused = OpCallFailed(node, error)
            whole_args = torch.fx.node.map_arg(node.args, lambda n: whole[n.name] if n.name in whole else (
                held[n.name] if n.name in converted else _convert(held[n.name], self.device, self.dtype)))
            self._judge_refused_slice(node, refused, (list(whole_args), {}))

        truth = TruthInSlices(output.shape, rows, make)
        values = list(torch.fx.node.map_arg(node.args, lambda n: self.values.get(n.name)))
        if self.in_slices:
            return truth, values
        total = truth.whole()
        release_freed_memory()
        return total, values

    def skip(self, node: torch.fx.Node) -> None:
        """Account for a node that will not be replayed (its inputs may be released)."""
        self._release(node)

    def _convert(self, input_node: torch.fx.Node) -> Any:
        name = input_node.name
        if self._kept(input_node):
            return self.weights.get(name)
        if name not in self._cache:
            self._cache[name] = _convert(self.values.get(name), self.device, self.dtype)
        return self._cache[name]

    def _kept(self, input_node: torch.fx.Node) -> bool:
        """Whether a parameter's or buffer's float64 copy is (or, fitting, now becomes) one of
        `weights`' kept copies."""
        if self.weights is None or input_node.op != "placeholder":
            return False
        if self.weights.get(input_node.name) is not None:
            return True
        value = self.values.get(input_node.name)
        if not self.weights.admits(value):
            return False
        self.weights.keep(input_node.name, _convert(value, self.device, self.dtype))
        return True

    def _release(self, node: torch.fx.Node) -> None:
        for input_node in node.all_input_nodes:
            self._remaining[input_node.name] -= 1
            if self._remaining[input_node.name] <= 0:
                self._cache.pop(input_node.name, None)


def _convert(value: Any, device: torch.device, dtype: torch.dtype | None) -> Any:
    if isinstance(value, torch.Tensor):
        value = value.detach().to(device)
        if dtype is not None and value.is_floating_point():
            value = value.to(dtype)
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(_convert(v, device, dtype) for v in value)
    return value


# --- regions ------------------------------------------------------------------------------


def replay_region(members: list[torch.fx.Node], values: dict[str, Any], *,
                  dtype: torch.dtype = torch.float64, known: Mapping[str, tuple[Any, tuple[str, ...]]] | None = None
                  ) -> tuple[Any, int]:
    """(the last member's output, the largest reduction length) of a region replayed in `dtype`
    on CPU: each member computed on its predecessors' replayed outputs, and on torch's values
    (cast up) for what enters the region from outside. This is the truth of what one optimised
    node computes (a Conv with its BatchNorm folded in, a fused HardSwish): the rounding torch
    does between the members is then torch's error, not the backend's. OpCallFailed when a
    member's op raises. `known`: {FX node: (its output replayed in `dtype` from torch's values,
    the members that replay was made of)}, per-op truths already computed: the region's longest
    prefix found there is taken as it is, not replayed again."""
    replayed: dict[str, Any] = {}
    names = tuple(member.name for member in members)
    prefix = next((j for j in range(len(members) - 1, -1, -1) if names[j] in (known or {})
                   and known[names[j]][1] == names[:j + 1]), None)
    if prefix is not None:
        replayed[names[prefix]] = known[names[prefix]][0]
        members = members[prefix + 1:]
        if not members:
            return replayed[names[prefix]], 1
    device = torch.device("cpu")

    def value_of(node: torch.fx.Node) -> Any:
        if node.name in replayed:
            return replayed[node.name]
        if node.target is operator.getitem and node.args[0].name in replayed:
            return replayed[node.args[0].name][node.args[1]]
        return _convert(values.get(node.name), device, dtype)

    length, output = 1, None
    for member in members:
        args = list(torch.fx.node.map_arg(member.args, value_of))
        kwargs = dict(torch.fx.node.map_arg(member.kwargs, value_of))
        if kwargs.get("device") is not None:
            kwargs["device"] = device
        try:
            with torch.no_grad():
                output = replay_target(member)(*args, **kwargs)
        except Exception as error:  # torch's kernel refused these inputs
            raise OpCallFailed(member, error) from error
        replayed[member.name] = output
        length = max(length, reduction_length(member, args, output))
    return output, length


def replay_memory(values: Any) -> contextlib.AbstractContextManager[bool]:
    """The memory scope of an fp64 pass over torch's `values`: where they are held whole, freed
    blocks are reused within the pass and the heaps trimmed once after it
    (harness.runtime.memory.reusing_freed_memory: vgg16's page faults a quarter fewer); a
    streamed model's pass (values past the budget, a detector at 800 px) trims as it goes, as
    before, since streaming is there to bound its peak."""
    return contextlib.nullcontext(False) if getattr(values, "streaming", False) else reusing_freed_memory()


# --- model-level truth ---------------------------------------------------------------------


def program_truth(program: torch.export.ExportedProgram, values: dict[str, Any],
                  weights: Float64Weights | None = None) -> list[Any]:
    """The program's user outputs computed in float64 on CPU, node after node from its recorded
    inputs, parameters and buffers cast up exactly (a Replayer: large layers in slices, each fp64
    input released after its last use, each intermediate once nothing reads it any more; the
    parameters' copies kept in `weights` for the per-op truth where they fit).
    OpCallFailed when an op has no float64 kernel."""
    from exporter.capturing.signature import user_outputs
    from harness.analysis.torch_values import output_values

    nodes = [node for node in program.graph.nodes if node.op == "call_function"]
    kept = {a.name for a in user_outputs(program) if isinstance(a, torch.fx.Node)}
    reads_left = Counter(source.name for node in nodes for source in node.all_input_nodes)
    chained = {node.name: values.get(node.name) for node in program.graph.nodes
               if node.op != "call_function"}  # inputs, parameters, buffers as recorded
    replay = Replayer(nodes, chained, device="cpu", dtype=torch.float64, weights=weights)
    for node in nodes:
        chained[node.name], _ = replay(node)
        for source in node.all_input_nodes:
            reads_left[source.name] -= 1
            if reads_left[source.name] <= 0 and source.name not in kept and source.op == "call_function":
                chained.pop(source.name, None)
    return output_values(program, chained)


_CONVOLUTIONS = {torch.conv1d: 1, torch.conv2d: 2, torch.conv3d: 3,
                 torch.nn.functional.conv1d: 1, torch.nn.functional.conv2d: 2, torch.nn.functional.conv3d: 3}


class SlicedConvolutions(torch.overrides.TorchFunctionMode):
    """Inside it, a float64 convolution whose unfolded input (torch's float64 kernel unfolds
    every image, im2col, before its matrix product) would exceed `SLICED_BYTES` runs in slices
    of its input channels, image by image, the partial results summed, as the Replayer slices a
    recorded one. A module run eagerly in float64 (`model_truth`) then never holds a whole
    unfolded input: a 3x3 convolution of 256 channels on a 200 x 267 map (a detector's FPN at
    800 px) unfolds to 0.98 GB in float64."""

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        rank = _CONVOLUTIONS.get(func)
        if rank is not None:
            slices = _convolution_slices(rank, *args, **kwargs)
            if slices > 1:
                return _convolution_in_slices(func, slices, *args, **kwargs)
            images = _convolution_images(rank, *args, **kwargs)
            if images:
                return _convolution_in_images(func, images, *args, **kwargs)
        return func(*args, **kwargs)


def _tuple(value: Any, rank: int) -> tuple[int, ...]:
    return tuple(value) if isinstance(value, (list, tuple)) else (int(value),) * rank


def _unfolded_bytes(rank: int, input: Any, weight: Any, stride: Any, padding: Any, dilation: Any) -> int:
    """Bytes one image of a float64 convolution of `rank` unfolds to (torch's float64 kernel
    unfolds its input, im2col, before its matrix product); 0 when nothing is unfolded (a
    pointwise convolution) or it is no float64 convolution of that rank."""
    if (not isinstance(input, torch.Tensor) or not isinstance(weight, torch.Tensor) or input.dtype != torch.float64
            or isinstance(padding, str) or weight.dim() != rank + 2 or input.dim() != rank + 2):
        return 0
    stride, padding, dilation = _tuple(stride, rank), _tuple(padding, rank), _tuple(dilation, rank)
    kernel = tuple(weight.shape[2:])
    if all(k == 1 for k in kernel) and all(s == 1 for s in stride) and not any(padding):
        return 0  # a pointwise convolution is a matrix product on the input as it is: nothing unfolded
    spatial = [(size + 2 * pad - dil * (k - 1) - 1) // st + 1
               for size, pad, dil, k, st in zip(input.shape[2:], padding, dilation, kernel, stride)]
    return weight[0].numel() * _prod(spatial) * input.element_size()


def _convolution_slices(rank: int, input: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0,
                        dilation: Any = 1, groups: int = 1) -> int:
    """How many slices of input channels a float64 convolution needs (1: none)."""
    unfolded = _unfolded_bytes(rank, input, weight, stride, padding, dilation) if groups == 1 else 0
    return min(int(weight.shape[1]), -(-unfolded // SLICED_BYTES)) if unfolded else 1


def _convolution_images(rank: int, input: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0,
                        dilation: Any = 1, groups: int = 1) -> int:
    """Images per call of a float64 convolution whose images each unfold within `SLICED_BYTES`
    but not all together (torch's kernel unfolds the whole batch at once); 0: run it whole."""
    per_image = _unfolded_bytes(rank, input, weight, stride, padding, dilation)
    if not per_image or input.shape[0] < 2 or per_image * input.shape[0] <= SLICED_BYTES:
        return 0
    return max(1, SLICED_BYTES // per_image)


def _convolution_in_images(func: Any, images: int, input: torch.Tensor, *rest: Any, **kwargs: Any) -> torch.Tensor:
    """`func` on groups of `images` images, each image computed as in the whole call (the same bits)."""
    total = None
    for start in range(0, input.shape[0], images):
        stop = min(start + images, input.shape[0])
        part = func(input[start:stop], *rest, **kwargs)
        if total is None:
            total = part.new_empty((input.shape[0], *part.shape[1:]))
        total[start:stop].copy_(part)
        del part
    release_freed_memory()
    return total


def _convolution_in_slices(func: Any, slices: int, input: torch.Tensor, weight: torch.Tensor, bias: Any = None,
                           *rest: Any, **kwargs: Any) -> torch.Tensor:
    channels = weight.shape[1]
    per_slice = -(-channels // slices)
    total = None
    for image in range(input.shape[0]):
        for start in range(0, channels, per_slice):
            stop = min(start + per_slice, channels)
            part = func(input[image:image + 1, start:stop], weight[:, start:stop], None, *rest, **kwargs)
            if total is None:
                total = part.new_zeros((input.shape[0], *part.shape[1:]))
            total[image:image + 1].add_(part)
            del part
    if bias is not None:
        total.add_(bias.reshape([1, -1] + [1] * (total.dim() - 2)))
    release_freed_memory()
    return total


def model_truth(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any] | None = None) -> Any:
    """The module's outputs in float64 on CPU: its floating parameters and buffers, and the
    floating tensors of `args` and `kwargs`, cast up exactly (the module is not changed).
    OpCallFailed when the module cannot run in float64 (an op without a float64 kernel, or one
    that insists on its own dtype)."""
    state = {name: _convert(value, torch.device("cpu"), torch.float64)
             for name, value in [*module.named_parameters(), *module.named_buffers()]}
    args64 = _convert(list(args), torch.device("cpu"), torch.float64)
    kwargs64 = {key: _convert(value, torch.device("cpu"), torch.float64) for key, value in (kwargs or {}).items()}
    from exporter.capturing.trace import eval_mode

    try:
        with torch.no_grad(), eval_mode(module), SlicedConvolutions():
            return torch.func.functional_call(module, state, tuple(args64), kwargs64)
    except Exception as error:  # the module's own code or a kernel refused float64
        raise OpCallFailed(None, error) from error
