"""Quantized ops judged in quantization steps (units of the quantized tensor's scale).

A PT2E-quantized model exports as QuantizeLinear / DequantizeLinear pairs around float ops; a
runtime may run each pair as written, or fuse DequantizeLinear -> op -> QuantizeLinear into one
integer kernel (onnxruntime's QLinearConv, QGemm, QLinearAdd, ... at ORT_ENABLE_ALL). Every row
that reads or writes a quantized tensor gets `quant_steps` (harness.metrics.quant_steps):

* a dequantize row: its isolated output against torch's, in steps of its scale (exact: both
  compute (q - zero_point) * scale in float32);
* a quantize row: the *quantized region* that ends in it, as the runtime runs it: the model cut
  at every quantized tensor, each fed torch's integers, so that the DequantizeLinear nodes
  feeding the region, the float ops between and the QuantizeLinear run (or fuse) together and
  nothing else's error reaches them. Its truth is the region's float computation in float64 on
  the dequantized inputs, rounded as torch's quantize rounds (half to even, clamped).

The rule (docs/ARCHITECTURE.md, "Quantized ops"): a quantize op alone agrees with torch's
exactly, except at rounding ties; a region agrees with its truth exactly except where the truth
lies within the float noise of a tie (either neighbour is then correct); a region the runtime
fused into an integer kernel may be one step off anywhere (the kernel requantizes its int32
accumulator with a fixed-point multiplier), and so may one whose float bias the runtime
quantized to int32 for such a kernel; anything beyond is a divergence. Which regions fused is
read from the runtime: onnxruntime's optimised graph, OpenVINO's runtime graph (a layer run in
int8/uint8 that holds the region's QuantizeLinear).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
import torch
import torch.fx

from harness.analysis.rows import OpRecord
from harness.analysis.strictness import harness_errors
from harness.analysis.truth import OpCallFailed, replay_region
from harness.metrics.quant_steps import QuantSteps, RegionKernel, quant_steps
from harness.metrics.verdict import Verdict
from harness.runtime.backends.precision import RuntimeGraph
from harness.runtime.errors import BACKEND_ERRORS


QUANT_STEPS_RULE = "quant-steps"

QUANTIZE_OPS = frozenset({
    "quantized_decomposed.quantize_per_tensor.default", "quantized_decomposed.quantize_per_tensor.tensor",
    "quantized_decomposed.quantize_per_tensor.tensor2", "quantized_decomposed.quantize_per_channel.default",
})
DEQUANTIZE_OPS = frozenset({
    "quantized_decomposed.dequantize_per_tensor.default", "quantized_decomposed.dequantize_per_tensor.tensor",
    "quantized_decomposed.dequantize_per_tensor.tensor2", "quantized_decomposed.dequantize_per_channel.default",
})

# onnxruntime's integer kernels that replace DequantizeLinear -> op -> QuantizeLinear: each
# accumulates in int32 and requantizes once, which may land one step from the float result.
INTEGER_KERNELS = frozenset({
    "QLinearConv", "QLinearMatMul", "QGemm", "QLinearAdd", "QLinearMul", "QLinearAveragePool",
    "QLinearGlobalAveragePool", "QLinearConcat", "QLinearLeakyRelu", "QLinearSigmoid", "QLinearSoftmax",
    "QLinearReduceMean", "QLinearWhere", "QLinearConvTranspose", "MatMulInteger", "ConvInteger",
    "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "QAttention",
})

OPENVINO_INTEGER = "openvino integer layer"
"""OpenVINO's CPU plugin runs DequantizeLinear -> op -> QuantizeLinear as one layer in int8/uint8
(its low-precision transformations), which requantizes as onnxruntime's integer kernels do."""

BIAS_QUANTIZED = "bias quantized to int32"
"""onnxruntime's QDQ optimiser may quantize a float bias to int32 (scale: input scale x weight
scale) and dequantize it, as its integer kernels take the bias: the rounding is the kernel's."""

REDUCED_COMPUTE = {"MatMulNBits": {2: "float16", 3: "bfloat16", 4: "int8"}}
"""onnxruntime kernels whose `accuracy_level` attribute asks for arithmetic below float32, by
level: MatMulNBits (what its DequantizeLinear -> MatMul fusion makes of a weight's DQ when the
MatMul's result is not quantized next; accuracy level 4 by default, session option
`session.qdq_matmulnbits_accuracy_level`) quantizes its float activation to int8 per block of
`block_size` along K at level 4. That is the runtime's precision, not the graph's: the region
keeps the exact rule, and the kernel is named in its row (measured on a dynamically quantized
transformer layer: 3.3e-3 from the float32 product, 0.13 steps of the next quantize; with level
1 the regions match disabled exactly)."""


def reduced_compute(node: onnx.NodeProto) -> str:
    """'' or how `node` computes below float32 ('int8 activations, blocks of 32 (accuracy_level 4)')."""
    levels = REDUCED_COMPUTE.get(node.op_type)
    if not levels:
        return ""
    attributes = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    precision = levels.get(int(attributes.get("accuracy_level", 0)))
    if precision is None:
        return ""
    blocks = f", blocks of {attributes['block_size']}" if "block_size" in attributes else ""
    return f"{precision} activations{blocks} (accuracy_level {attributes['accuracy_level']})"


FUSED_ALLOWED_STEPS = 1
"""Steps a fused integer kernel may differ by: its one requantization of the int32 accumulator."""

RECIPROCAL_MARGIN = 2.0 ** -21
"""Relative width of the band around a tie where two correct float32 quantizations may round
apart: torch's x * fl(1 / scale) and QuantizeLinear's x / scale are each within 1.5 float32 ulps
(2^-24 relative each) of the exact quotient, relative to the position x / scale; a runtime that
quantizes through the clamped range (OpenVINO's FakeQuantize: (x - low) * (levels - 1) /
(high - low)) has intermediates up to qmax - qmin steps, so its error is relative to that.
2^-21 of the larger leaves a factor of 4 over the ulps (measured on OpenVINO 2026.4: mismatches
lie within 2.4e-5 steps of a tie, the band over int8's range is 1.2e-4)."""


def rounding_band(qp: "QParams", positions: np.ndarray) -> np.ndarray:
    """The reciprocal band (in steps) around each position's nearest tie: RECIPROCAL_MARGIN
    times the larger of |x / scale| and the integer range qmax - qmin."""
    return RECIPROCAL_MARGIN * np.maximum(np.abs(positions - _zp(qp, positions)), float(qp.qmax - qp.qmin))

NOISE_MARGIN_FACTOR = 4.0
"""How many times torch's own float32 distance from the region's fp64 truth (in steps) the tie
band spans: a backend's float32 computation of the same ops is off by the same order."""


@dataclass(frozen=True)
class QParams:
    """How a tensor is quantized: scale and zero point (per tensor, or per channel along
    `axis`), the clamping range and the integer dtype."""

    scale: np.ndarray  # float64, 0-d or 1-d
    zero_point: np.ndarray  # float64, same shape as scale
    qmin: int
    qmax: int
    dtype: str
    axis: int | None = None

    def positions(self, values: Any) -> np.ndarray:
        """Where float `values` lie on the integer grid: values / scale + zero_point (float64)."""
        array = np.asarray(values, dtype=np.float64)
        return array / self._along(array) + self._along(array, self.zero_point)

    def _along(self, array: np.ndarray, what: np.ndarray | None = None) -> np.ndarray:
        what = self.scale if what is None else what
        if self.axis is None or what.ndim == 0:
            return what.reshape(())
        shape = [1] * array.ndim
        shape[self.axis] = -1
        return what.reshape(shape)

    @property
    def largest_scale(self) -> float:
        return float(np.max(self.scale))


def qparams_of(node: torch.fx.Node, values: Mapping[str, Any]) -> QParams | None:
    """The quantization parameters of a quantize or dequantize FX node (numbers from its
    arguments, or torch's values where they are tensors); None for another node."""
    target = str(node.target)
    if target not in QUANTIZE_OPS and target not in DEQUANTIZE_OPS:
        return None

    def number(arg: Any) -> np.ndarray:
        if isinstance(arg, torch.fx.Node):
            arg = values.get(arg.name)
        if isinstance(arg, torch.Tensor):
            return arg.detach().to("cpu", torch.float64).numpy().reshape(-1 if arg.numel() > 1 else ())
        return np.asarray(float(arg), dtype=np.float64)

    args = list(node.args)
    per_channel = "per_channel" in target
    scale, zero_point = number(args[1]), (number(args[2]) if args[2] is not None else None)
    axis = int(args[3]) if per_channel else None
    qmin, qmax, dtype = (args[4], args[5], args[6]) if per_channel else (args[3], args[4], args[5])
    if isinstance(qmin, torch.fx.Node) or isinstance(qmax, torch.fx.Node):
        qmin, qmax = int(values[qmin.name]), int(values[qmax.name])
    zero_point = np.zeros_like(scale) if zero_point is None else zero_point
    if axis is not None:
        rank = node.meta["val"].dim() if isinstance(node.meta.get("val"), torch.Tensor) else None
        axis = axis % rank if rank else axis
    return QParams(scale, zero_point, int(qmin), int(qmax), str(dtype).removeprefix("torch."), axis)


def is_quantized_op(aten: str) -> bool:
    return aten in QUANTIZE_OPS or aten in DEQUANTIZE_OPS


# --- the quantized regions ----------------------------------------------------------------------


def region_members(quantize: torch.fx.Node) -> list[torch.fx.Node]:
    """The float ops between the dequantized tensors (or model inputs, or weights) and
    `quantize`, in graph order: what an integer kernel fusing the region computes."""
    members: dict[str, torch.fx.Node] = {}
    stack = [quantize.args[0]] if isinstance(quantize.args[0], torch.fx.Node) else []
    while stack:
        node = stack.pop()
        if node.name in members or node.op != "call_function" or str(node.target) in DEQUANTIZE_OPS \
                or str(node.target) in QUANTIZE_OPS:
            continue
        members[node.name] = node
        stack.extend(n for n in node.all_input_nodes)
    order = {n: i for i, n in enumerate(quantize.graph.nodes)}
    return sorted(members.values(), key=lambda n: order[n])


def entry_dequantizers(quantize: torch.fx.Node) -> list[torch.fx.Node]:
    """The dequantize nodes whose values enter `quantize`'s region."""
    readers = [*region_members(quantize), quantize]
    found = {n.name: n for reader in readers for n in reader.all_input_nodes if str(n.target) in DEQUANTIZE_OPS}
    return list(found.values())


def cut_at_quantized(model: onnx.ModelProto, quantized: Mapping[str, str],
                     shapes: Mapping[str, tuple[int, ...]] | None = None,
                     qparams: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None
                     ) -> tuple[onnx.ModelProto, dict[str, str], dict[str, np.ndarray]]:
    """`model` cut at every quantized tensor: each value in `quantized` (ONNX value -> its FX
    node) becomes a graph input that its readers take, while the QuantizeLinear that computed it
    writes a graph output of its own; returns the model, {value: that output's name} and the
    feeds the cut added besides the quantized values (see below). Regions then run from torch's
    integers, as they would fuse, and nothing else's error reaches them.

    Every node of `model` stays, its outputs too: a runtime decides some fusions by how many
    nodes read a value (onnxruntime fuses a weight's DequantizeLinear into MatMulNBits only when
    that MatMul is its one reader), so a pruned graph could run kernels the model's own session
    does not. `shapes` gives the cut values' shapes where the model's value_info does not.
    `qparams` ({value: torch's scale and zero point}) feeds the DequantizeLinear readers of a cut
    value whose scale or zero point the graph computes at run time (dynamic quantization), so
    they dequantize as torch did, not with qparams from the runtime's own float values."""
    cut = onnx.ModelProto()
    cut.CopyFrom(model)
    graph = cut.graph
    outputs_now = {o.name for o in graph.output}
    types = {vi.name: vi for vi in [*graph.value_info, *graph.input, *graph.output]}
    model_outputs = list(graph.output)
    renamed: dict[str, str] = {}
    for node in graph.node:
        for index, name in enumerate(node.output):
            if name in quantized and name not in outputs_now:
                node.output[index] = renamed[name] = f"{name}__quantized_region"
    del graph.output[:]
    for name, region_output in renamed.items():
        info = types.get(name)
        elem = info.type.tensor_type.elem_type if info is not None else onnx.TensorProto.INT8
        shape = (shapes or {}).get(name)
        if shape is None and info is not None and info.type.tensor_type.HasField("shape"):
            shape = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                     for d in info.type.tensor_type.shape.dim]
        graph.input.append(onnx.helper.make_tensor_value_info(name, elem, shape))
        graph.output.append(onnx.helper.make_tensor_value_info(region_output, elem, shape))
    graph.output.extend(model_outputs)
    feeds = _feed_run_time_qparams(graph, renamed, qparams or {}, types)
    kept = set(renamed.values()) | {o.name for o in model_outputs}
    needed = _needed_nodes(graph, kept)
    nodes = [n for i, n in enumerate(graph.node) if i in needed]
    del graph.node[:]
    graph.node.extend(nodes)
    used = {name for n in nodes for name in n.input}
    inputs = [i for i in graph.input if i.name in used]
    del graph.input[:]
    graph.input.extend(inputs)
    del graph.value_info[:]
    return cut, renamed, {name: value for name, value in feeds.items() if name in used}


def _feed_run_time_qparams(graph: onnx.GraphProto, cut_values: Mapping[str, str],
                           qparams: Mapping[str, tuple[np.ndarray, np.ndarray]],
                           types: Mapping[str, onnx.ValueInfoProto]) -> dict[str, np.ndarray]:
    """Point the scale and zero point of each DequantizeLinear reading a cut value at new graph
    inputs holding torch's, where the graph computes them from its inputs; returns their feeds.
    A constant scale stays as it is: the runtime's fusions (QLinearConv, ...) need it constant."""
    run_time = {i.name for i in graph.input}
    for node in graph.node:  # graph order: a value computed from an input is a run-time value
        if any(name in run_time for name in node.input):
            run_time.update(o for o in node.output if o)
    feeds: dict[str, np.ndarray] = {}
    for node in graph.node:
        if node.op_type != "DequantizeLinear" or node.input[0] not in cut_values or node.input[0] not in qparams:
            continue
        scale, zero_point = qparams[node.input[0]]
        quantized_type = next(i.type.tensor_type.elem_type for i in graph.input if i.name == node.input[0])
        for index, what, value in ((1, "scale", scale), (2, "zero_point", zero_point)):
            if index >= len(node.input) or node.input[index] not in run_time:
                continue
            info = types.get(node.input[index])
            elem = (quantized_type if what == "zero_point" else
                    info.type.tensor_type.elem_type if info is not None else onnx.TensorProto.FLOAT)
            array = np.asarray(value, dtype=onnx.helper.tensor_dtype_to_np_dtype(elem))
            name = f"{node.input[0]}__torch_{what}"
            node.input[index] = name
            if name not in feeds:
                feeds[name] = array.reshape(()) if array.size == 1 else array
                graph.input.append(onnx.helper.make_tensor_value_info(name, elem, feeds[name].shape))
    return feeds


def _needed_nodes(graph: onnx.GraphProto, outputs: set[str]) -> set[int]:
    producer = {name: i for i, node in enumerate(graph.node) for name in node.output}
    needed: set[int] = set()
    stack = [producer[name] for name in outputs if name in producer]
    while stack:
        index = stack.pop()
        if index in needed:
            continue
        needed.add(index)
        stack.extend(producer[name] for name in graph.node[index].input if name in producer)
    return needed


def region_kernels(model: onnx.ModelProto, graph: RuntimeGraph, names: list[str]) -> dict[str, RegionKernel]:
    """How the runtime computed each region output in `names` of `model`, from what it made of
    that model in the load that ran it (`graph`, BackendRunner.inspect): onnxruntime's
    optimised graph or OpenVINO's runtime layers; {} when the backend reports neither."""
    if graph.optimised is not None:
        return optimised_kernels(model, graph.optimised, names)
    if graph.layers:
        return openvino_kernels(model, graph, names)
    return {}


def optimised_kernels(model: onnx.ModelProto, optimised: onnx.ModelProto, names: list[str]) -> dict[str, RegionKernel]:
    """How onnxruntime computes each region output in `names`, read from its optimised graph:
    the integer kernel among the nodes that compute it ('com.microsoft::QLinearConv': the region
    was fused, possibly with a DequantizeLinear -> QuantizeLinear after the kernel; it
    requantizes), else the node that writes it ('ai.onnx::QuantizeLinear': run as written). A
    kernel computing below float32 on the way (REDUCED_COMPUTE) is named in `below_float32`:
    'com.microsoft::MatMulNBits on int8 activations, blocks of 32 (accuracy_level 4)'."""
    nodes = list(optimised.graph.node)
    producer = {out: index for index, node in enumerate(nodes) for out in node.output if out}
    known = ({i.name for i in model.graph.input} | {t.name for t in model.graph.initializer}
             | {o for node in model.graph.node for o in node.output})
    made = ({t.name for t in optimised.graph.initializer if t.data_type == onnx.TensorProto.INT32}
            - known)  # int32 parameters the runtime computed: a quantized bias (a weight it transposed is int8)
    kinds = {}
    for name in names:
        if name not in producer:
            continue
        writer = nodes[producer[name]]
        kernel, requantizes = f"{writer.domain or 'ai.onnx'}::{writer.op_type}", False
        pending, seen, reduced = [producer[name]], set(), []
        while pending:
            index = pending.pop()
            if index in seen:
                continue
            seen.add(index)
            node = nodes[index]
            if reduced_compute(node):
                reduced.append(f"{node.domain or 'ai.onnx'}::{node.op_type} on {reduced_compute(node)}")
            if node.op_type in INTEGER_KERNELS:
                kernel, requantizes = f"{node.domain or 'ai.onnx'}::{node.op_type}", True
                break
            if node.op_type == "DequantizeLinear" and node.input[0] in made:  # a float bias it quantized
                kernel, requantizes = f"{BIAS_QUANTIZED} ({node.input[0]})", True
                break
            pending.extend(producer[i] for i in node.input if i in producer)
        kinds[name] = RegionKernel(kernel, requantizes, tuple(sorted(set(reduced))))
    return kinds


def openvino_kernels(model: onnx.ModelProto, graph: RuntimeGraph, names: list[str]) -> dict[str, RegionKernel]:
    """How OpenVINO computes each region output in `names`, read from its runtime layers: the
    layer that holds the QuantizeLinear writing it, where that layer runs in int8/uint8 ('openvino
    integer layer (Convolution, uint8)', requantizing); outputs of float layers are left out,
    except that a region holding a FullyConnected layer with integer weights while the plugin
    quantizes such layers' activations at run time is named ('ai.onnx::QuantizeLinear with
    OpenVINO FullyConnected on int8 activations, groups of 32 (DYNAMIC_QUANTIZATION_GROUP_SIZE)'):
    that is the runtime's precision, as MatMulNBits' is onnxruntime's, and keeps the exact rule."""
    layers, group = graph.layers, graph.dynamic_quantization_group
    writer = {out: node.name for node in model.graph.node for out in node.output if out}
    kinds = {}
    for layer in layers:
        if layer["precision"] not in ("int8", "uint8"):
            continue
        for name in names:
            if writer.get(name) in layer["onnx_nodes"]:
                kinds[name] = RegionKernel(f"{OPENVINO_INTEGER} ({layer['type']}, {layer['precision']})", True)
    dynamic = [layer for layer in layers if group and layer["type"] == "FullyConnected"
               and layer["precision"] in ("int8", "uint8")]
    for name in names:
        if name in kinds or not dynamic:
            continue
        computing = region_nodes(model, name)
        if any(computing.intersection(layer["onnx_nodes"]) for layer in dynamic):
            kinds[name] = RegionKernel("ai.onnx::QuantizeLinear", False, (
                f"OpenVINO FullyConnected on int8 activations, groups of {group} (DYNAMIC_QUANTIZATION_GROUP_SIZE)",))
    return kinds


def region_nodes(model: onnx.ModelProto, name: str) -> set[str]:
    """The names of the nodes of `model` that compute value `name` from its inputs."""
    graph = model.graph
    return {graph.node[index].name for index in _needed_nodes(graph, {name})}


@dataclass
class RegionResult:
    """One quantize node's region: the backend's and torch's integers against the truth."""

    backend: QuantSteps
    torch_side: QuantSteps
    allowed: int
    beyond: int  # elements past what the rule allows
    kernel: RegionKernel | None  # how the runtime computed the output (None: not known, run as written)
    members: list[str]


def judge_region(actual: np.ndarray, torch_int: np.ndarray, truth_positions: np.ndarray, torch_positions: np.ndarray,
                 qp: QParams, fused: bool, noise_steps: float = 0.0) -> tuple[QuantSteps, QuantSteps, int, int]:
    """Both sides' steps against the truth, the steps allowed and the elements beyond them.

    The tie band is the float noise of the region's computation in steps: the larger of
    `noise_steps` (the noise model's bound for two correct float32 implementations) and
    NOISE_MARGIN_FACTOR times torch's own distance from the truth, plus the reciprocal band:
    where the truth lies that close to k + 1/2, either neighbour counts."""
    observed = float(np.max(np.abs(torch_positions - truth_positions))) if truth_positions.size else 0.0
    noise = max(noise_steps, NOISE_MARGIN_FACTOR * observed)
    margin = noise + rounding_band(qp, truth_positions)
    allowed = FUSED_ALLOWED_STEPS if fused else 0
    backend = _steps(actual, truth_positions, qp, margin)
    torch_side = _steps(torch_int, truth_positions, qp, margin)
    expected = np.clip(np.rint(truth_positions), qp.qmin, qp.qmax)
    distance = np.abs(actual.astype(np.float64) - expected)
    tie = np.abs(np.abs(truth_positions - np.floor(truth_positions)) - 0.5) <= margin
    beyond = (distance > allowed) & ~(tie & (distance <= allowed + 1))
    return backend, torch_side, allowed, int(beyond.sum())


def _zp(qp: QParams, like: np.ndarray) -> np.ndarray:
    return qp._along(like, qp.zero_point)


def _steps(actual: np.ndarray, positions: np.ndarray, qp: QParams, margin: Any) -> QuantSteps:
    """quant_steps on grid positions already computed (scale 1, zero point 0), reported with the
    tensor's own scale and zero point (the largest, per channel)."""
    found = quant_steps(actual, positions, scale=1.0, zero_point=0, qmin=qp.qmin, qmax=qp.qmax, tie_margin=margin)
    return QuantSteps(scale=qp.largest_scale, zero_point=int(np.max(qp.zero_point)), qmin=qp.qmin, qmax=qp.qmax,
                      max_steps=found.max_steps, off_by_one_or_more=found.off_by_one_or_more,
                      elements=found.elements, at_ties=found.at_ties, at_saturation=found.at_saturation)


def region_verdict(result: RegionResult, dtype: str, output: str) -> Verdict:
    """The row's verdict from its region's steps."""
    passed = result.beyond == 0
    kernel = result.kernel.describe() if result.kernel is not None else ""
    how = (f"requantized by the runtime ({kernel}): {result.allowed} step allowed" if result.allowed
           else f"run as {kernel or 'written'}: exact except at ties")
    reason = (f"{how}; backend max {result.backend.max_steps:g} step(s) from the truth, "
              f"{result.backend.off_by_one_or_more} of {result.backend.elements} off "
              f"({result.backend.at_ties} at ties, {result.backend.at_saturation} at saturation), "
              f"{result.beyond} beyond the rule; torch max {result.torch_side.max_steps:g}")
    return Verdict(QUANT_STEPS_RULE, passed, dtype, output, e_backend=result.backend.max_steps,
                   e_torch=result.torch_side.max_steps, allowed=float(result.allowed),
                   score=1.0 + result.backend.max_steps if not passed
                   else result.backend.max_steps / (result.allowed + 2),
                   decided_by=QUANT_STEPS_RULE, reason=reason)


def isolated_quantize_verdict(record: OpRecord, actual: np.ndarray, torch_input: np.ndarray, torch_int: np.ndarray,
                              qp: QParams) -> Verdict:
    """A quantize op alone, fed torch's float input: equal to torch's integers except at ties
    (where x * fl(1/scale) and x / scale may round apart), named in the row's notes."""
    positions = qp.positions(torch_input)
    margin = rounding_band(qp, positions)
    against_torch = _steps(actual, torch_int, qp, margin)
    distance = np.abs(actual.astype(np.float64) - torch_int.astype(np.float64))
    tie = np.abs(np.abs(positions - np.floor(positions)) - 0.5) <= margin
    beyond = int(((distance > 0) & ~(tie & (distance <= 1))).sum())
    ties = int(((distance > 0) & tie).sum())
    if ties:
        record.notes.append(f"quantize alone: {ties} element(s) one step from torch at rounding ties "
                            "(torch rounds x * (1/scale), QuantizeLinear x / scale or through the clamped range; "
                            "all half to even)")
    passed = beyond == 0
    return Verdict(QUANT_STEPS_RULE, passed, record.dtype, record.fx_node, e_backend=against_torch.max_steps,
                   e_torch=0.0, allowed=0.0, score=0.0 if passed else 1.0 + against_torch.max_steps,
                   decided_by=QUANT_STEPS_RULE,
                   reason=f"quantize alone against torch: max {against_torch.max_steps:g} step(s), {ties} at ties, "
                          f"{beyond} elsewhere (exact except at ties)")


# --- the driver ------------------------------------------------------------------------------------


def annotate(records: Mapping[str, OpRecord], analysis: Any) -> list[str]:
    """Fill `quant_steps` and the verdict of every quantize and dequantize row of `records`
    (an fx_rows analysis of a model holding quantized_decomposed ops, its rows judged); returns
    notes for the verification. Rows of other ops are left as they are."""
    annotate_rows(records, analysis)
    return annotate_regions(records, analysis)


def annotate_rows(records: Mapping[str, OpRecord], analysis: Any) -> None:
    """The rows' own checks, from their isolated outputs: dequantize rows in steps, quantize
    rows alone (exact except at ties). A streamed analysis calls it chunk by chunk, while the
    isolated outputs are still held."""
    for node in analysis.program.graph.nodes:
        record = records.get(node.name)
        if record is None or node.op != "call_function":
            continue
        if str(node.target) in DEQUANTIZE_OPS:
            _dequantize_row(record, node, analysis)
        elif str(node.target) in QUANTIZE_OPS:
            _quantize_row(record, node, analysis)


def annotate_regions(records: Mapping[str, OpRecord], analysis: Any) -> list[str]:
    """Every quantize row's region, run once for all of them (after annotate_rows, so that a
    region reading a failing dequantize names it); returns notes."""
    quantizers = [n for n in analysis.program.graph.nodes
                  if n.op == "call_function" and str(n.target) in QUANTIZE_OPS and n.name in records]
    if not quantizers:
        return []
    if getattr(analysis.values, "streaming", False):
        return ["quantized regions not measured: torch's values were streamed (released once their ops were "
                "measured); the quantize and dequantize rows are judged alone"]
    return _regions(records, quantizers, analysis)


def _isolated_output(record: OpRecord, analysis: Any) -> np.ndarray | None:
    if record.artifacts is None or record.isolated is None:
        return None
    outputs = record.artifacts.isolated_outputs
    name = analysis.groups[record.fx_node].outputs.get(0)
    return np.asarray(outputs[name]) if name in outputs else None


def _torch_array(value: Any) -> np.ndarray:
    return value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)


def _dequantize_row(record: OpRecord, node: torch.fx.Node, analysis: Any) -> None:
    """A dequantize row in steps of its scale: exact, or a divergence."""
    actual = _isolated_output(record, analysis)
    qp = qparams_of(node, analysis.values)
    if actual is None or qp is None or actual.shape != tuple(analysis.values[node.name].shape):
        return
    # a dequantized value lies on a step up to float32 rounding: both sides are snapped to it
    expected = np.rint(qp.positions(_torch_array(analysis.values[node.name])))
    record.quant_steps = _steps(np.rint(qp.positions(actual)), expected, qp, 0.0)
    exact = record.quant_steps.off_by_one_or_more == 0
    record.verdict = Verdict(QUANT_STEPS_RULE, exact, record.dtype, record.fx_node, e_backend=record.quant_steps.max_steps,
                             e_torch=0.0, allowed=0.0, score=0.0 if exact else 1.0 + record.quant_steps.max_steps,
                             decided_by=QUANT_STEPS_RULE,
                             reason=f"dequantize against torch: max {record.quant_steps.max_steps:g} step(s) "
                                    "(exact: both compute (q - zero_point) * scale in float32)")
    record.passed = exact


def _quantize_row(record: OpRecord, node: torch.fx.Node, analysis: Any) -> None:
    """A quantize op alone: torch's integers except at ties."""
    actual = _isolated_output(record, analysis)
    qp = qparams_of(node, analysis.values)
    source = node.args[0]
    if actual is None or qp is None or not isinstance(source, torch.fx.Node):
        return
    torch_int = _torch_array(analysis.values[node.name])
    if actual.shape != torch_int.shape:
        return
    record.verdict = isolated_quantize_verdict(record, actual, _torch_array(analysis.values[source.name]),
                                               torch_int, qp)
    record.passed = record.verdict.passed


def _regions(records: Mapping[str, OpRecord], quantizers: list[torch.fx.Node], analysis: Any) -> list[str]:
    """Run every quantized region once (the model cut at its quantized tensors) and judge each
    quantize row's region against its truth."""
    quantized = {}
    for node in quantizers:
        name = analysis.groups[node.name].outputs.get(0)
        if name is not None:
            quantized[name] = node.name
    source = analysis.source_model
    if analysis.weights is not None:
        source = analysis.weights.restore(source)
    shapes = {name: tuple(analysis.values[fx].shape) for name, fx in quantized.items()
              if isinstance(analysis.values.get(fx), torch.Tensor)}
    qparams = {}
    for name, fx in quantized.items():
        qp = qparams_of(next(n for n in quantizers if n.name == fx), analysis.values)
        if qp is not None:
            qparams[name] = (qp.scale, qp.zero_point)
    cut, renamed, feeds = cut_at_quantized(source, quantized, shapes, qparams)
    if not renamed:
        return []
    feeds.update({i.name: analysis.feeds[i.name] for i in cut.graph.input if i.name in analysis.feeds})
    inputs = {i.name for i in cut.graph.input}
    for name in renamed:
        if name in inputs:
            feeds[name] = _torch_array(analysis.values[quantized[name]])
    # one load runs the cut model and says which regions the runtime fused (its optimised graph or
    # runtime layers); a runner that cannot say (a plain function) leaves every region unfused
    inspect = getattr(analysis.run, "inspect", None)
    graph = RuntimeGraph()
    try:
        with harness_errors("running the quantized regions", analysis.strict, findings=BACKEND_ERRORS) as failed:
            produced, graph = inspect(cut, feeds) if inspect is not None else (analysis.run(cut, feeds), graph)
    except BACKEND_ERRORS as error:  # the runtime refused the cut model: the rows keep their isolated verdicts
        return [f"quantized regions not run: {type(error).__name__}: {str(error)[:200]}"]
    if failed:  # the harness's own code around the run (raised in strict mode)
        return [failed.note]
    # on the CPU only: onnxruntime's integer kernels are CPU kernels, and OpenVINO runs on its CPU plugin
    kernels = region_kernels(cut, graph, list(renamed.values())) if analysis.device == "cpu" else {}
    for name, region_output in renamed.items():
        node = next(n for n in quantizers if n.name == quantized[name])
        record = records[node.name]
        if region_output not in produced:
            continue
        result = _region(node, np.asarray(produced[region_output]), kernels.get(region_output), analysis)
        if result is None:
            continue
        record.quant_steps = dataclasses.replace(result.backend, kernel=result.kernel)
        verdict = region_verdict(result, record.dtype, record.fx_node)
        failing_inputs = [n.name for n in entry_dequantizers(node) if records.get(n.name) is not None
                          and records[n.name].passed is False]
        if failing_inputs and not verdict.passed:  # the divergence is in a dequantize it reads: named there
            verdict = dataclasses.replace(verdict, score=1.0, reason=(
                f"{verdict.reason}; it reads {', '.join(failing_inputs)}, which fail(s) on their own"))
        record.notes.append(f"quantized region ({', '.join(result.members) or 'the quantize alone'}): {verdict.reason}")
        if not verdict.passed or record.verdict is None or record.verdict.passed:
            record.verdict = verdict if not verdict.passed or record.verdict is None else record.verdict
        record.passed = bool(record.passed is not False and verdict.passed)
    return []


def _region(node: torch.fx.Node, actual: np.ndarray, kernel: RegionKernel | None, analysis: Any) -> RegionResult | None:
    qp = qparams_of(node, analysis.values)
    source = node.args[0]
    if qp is None or not isinstance(source, torch.fx.Node):
        return None
    members = region_members(node)
    torch_float = _torch_array(analysis.values[source.name])
    try:
        truth, length = replay_region(members, analysis.values) if members else (
            torch.as_tensor(torch_float, dtype=torch.float64), 1)
    except OpCallFailed:
        return None
    truth_array = _torch_array(truth)
    # the noise model's bound is relative to the value's scale (its largest magnitude)
    bound = analysis.noise_model.bound("float32", length, max(len(members), 1)) if members else 0.0
    noise_steps = bound * float(np.max(np.abs(truth_array), initial=0.0)) / float(np.min(qp.scale))
    torch_int = _torch_array(analysis.values[node.name])
    if actual.shape != torch_int.shape or truth_array.shape != torch_int.shape:
        return None
    fused = kernel is not None and kernel.requantizes
    backend, torch_side, allowed, beyond = judge_region(actual, torch_int, qp.positions(truth_array),
                                                        qp.positions(torch_float), qp, fused, noise_steps)
    return RegionResult(backend, torch_side, allowed, beyond, kernel, [m.name for m in members])
