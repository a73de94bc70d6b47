"""Recurrent layers: nn.LSTM, nn.GRU and nn.RNN (tanh, relu) as ONNX LSTM, GRU and RNN.

torch calls one fused op per module (aten.lstm.input, ...) with every layer's weights in one
flat list: per layer and direction w_ih, w_hh[, b_ih, b_hh]. Each layer becomes one ONNX op
(both directions in one, direction="bidirectional"); its output [seq, dirs, batch, hidden] is
reshaped to torch's [seq, batch, dirs*hidden] to feed the next layer. Gate blocks are reordered
in the graph with a Gather (torch LSTM i,f,g,o -> ONNX i,o,f,c; GRU r,z,n -> z,r,h), so the
translation also holds when weights are inputs rather than initializers; GRU uses
linear_before_reset=1, which is torch's formula. Dropout between layers exists only in training.

While capturing a model that holds a recurrent layer (only then), the fused ops get shape-only
kernels (`_shape_only_rnn_kernels`): torch's own decompositions unroll the sequence and would fix
a dynamic sequence length. torch is restored when the capture ends, however it ends.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from exporter.errors import ExportError
from exporter.translate.graph import Graph, Value
from exporter.capturing.hooks import capture_hook
from exporter.translate.registry import normalize_target, symbolic

# Gate blocks of torch's weights, in the order ONNX wants them.
LSTM_GATES = (0, 3, 1, 2)  # torch i, f, g, o -> ONNX i, o, f, c(=g)
GRU_GATES = (1, 0, 2)  # torch r, z, n -> ONNX z, r, h(=n)
RNN_GATES = (0,)

PACKED_HINT = (
    "packed sequences (nn.utils.rnn.pack_padded_sequence) cannot be exported: pass the padded "
    "[seq, batch, features] tensor to the recurrent layer instead and mask or index the padded "
    "steps afterwards"
)


@dataclass(frozen=True)
class _Direction:
    """One layer's weights in one direction."""

    w_ih: Value
    w_hh: Value
    b_ih: Value | None
    b_hh: Value | None


def _split_params(
    params: Sequence[Value], has_biases: bool, num_layers: int, directions: int, kind: str
) -> list[list[_Direction]]:
    per_direction = 4 if has_biases else 2
    if len(params) != per_direction * num_layers * directions:
        if kind == "LSTM" and len(params) == (per_direction + 1) * num_layers * directions:
            raise ExportError(
                "nn.LSTM with proj_size > 0 has no ONNX equivalent (ONNX LSTM has no projection "
                "of the hidden state); export an LSTM with proj_size=0, or apply the projection "
                "as a separate nn.Linear on the outputs when only the outputs need projecting"
            )
        raise ExportError(f"{kind}: {len(params)} weight tensors for {num_layers} layer(s) x {directions} direction(s)")
    layers = []
    for layer in range(num_layers):
        dirs = []
        for direction in range(directions):
            start = (layer * directions + direction) * per_direction
            chunk = list(params[start:start + per_direction]) + [None, None]
            dirs.append(_Direction(chunk[0], chunk[1], chunk[2], chunk[3]))
        layers.append(dirs)
    return layers


def _reorder_gates(g: Graph, weight: Value, hidden: int, gates: Sequence[int]) -> Value:
    """Reorder the gate blocks (rows of `hidden`) of a weight or bias from torch's to ONNX's."""
    if list(gates) == sorted(gates):
        return weight
    rows = np.concatenate([np.arange(gate * hidden, (gate + 1) * hidden) for gate in gates])
    return g.op("Gather", weight, g.constant(rows), axis_i=0)


def _stack(g: Graph, values: Sequence[Value]) -> Value:
    """[directions, *shape] from one value per direction."""
    expanded = [g.op("Unsqueeze", v, g.constant([0])) for v in values]
    return expanded[0] if len(expanded) == 1 else g.op("Concat", *expanded, axis_i=0)


def _layer_weights(g: Graph, dirs: Sequence[_Direction], hidden: int, gates: Sequence[int]):
    """W, R and B (None without biases) of one ONNX recurrent op."""
    w = _stack(g, [_reorder_gates(g, d.w_ih, hidden, gates) for d in dirs])
    r = _stack(g, [_reorder_gates(g, d.w_hh, hidden, gates) for d in dirs])
    if dirs[0].b_ih is None:
        return w, r, None
    b = _stack(g, [
        g.op("Concat", _reorder_gates(g, d.b_ih, hidden, gates), _reorder_gates(g, d.b_hh, hidden, gates), axis_i=0)
        for d in dirs
    ])
    return w, r, b


def _layer_state(g: Graph, state: Value | None, layer: int, directions: int) -> Value | None:
    """This layer's slice [directions, batch, hidden] of torch's [layers*directions, batch, hidden]."""
    if state is None:
        return None
    start = layer * directions
    return g.op("Slice", state, g.constant([start]), g.constant([start + directions]), g.constant([0]))


def _merge_directions(g: Graph, y: Value, directions: int) -> Value:
    """ONNX Y [seq, dirs, batch, hidden] -> torch's [seq, batch, dirs*hidden]."""
    if directions == 1:
        return g.op("Squeeze", y, g.constant([1]))
    return g.op("Reshape", g.op("Transpose", y, perm_i=[0, 2, 1, 3]), g.constant([0, 0, -1]))


def _recurrent(
    g: Graph, kind: str, gates: Sequence[int], x: Value, states: Sequence[Value | None],
    params: Sequence[Value], has_biases: bool, num_layers: int, dropout: float, train: bool,
    bidirectional: bool, batch_first: bool, **attrs: Any,
) -> tuple[Value, list[Value]]:
    """Chain one ONNX `kind` op per layer; return torch's output and the final states."""
    if train and dropout > 0 and num_layers > 1:
        raise ExportError(f"{kind} dropout between layers only acts in training; call model.eval() before export")
    directions = 2 if bidirectional else 1
    layers = _split_params(params, has_biases, num_layers, directions, kind)
    hidden = layers[0][0].w_hh.shape[1]
    if not isinstance(hidden, int):
        raise ExportError(f"{kind}: the hidden size must be static")
    if batch_first:
        x = g.op("Transpose", x, perm_i=[1, 0, 2])
    finals: list[list[Value]] = [[] for _ in states]
    for index, dirs in enumerate(layers):
        w, r, b = _layer_weights(g, dirs, hidden, gates)
        initial = [_layer_state(g, s, index, directions) for s in states]
        outputs = g.op(
            kind, x, w, r, b, None, *initial, hidden_size_i=hidden,
            direction_s="bidirectional" if bidirectional else "forward", outputs=1 + len(states), **attrs,
        )
        x = _merge_directions(g, outputs[0], directions)
        for final, value in zip(finals, outputs[1:]):
            final.append(value)
    if batch_first:
        x = g.op("Transpose", x, perm_i=[1, 0, 2])
    return x, [f[0] if len(f) == 1 else g.op("Concat", *f, axis_i=0) for f in finals]


@symbolic("aten::lstm.input")
def lstm(g: Graph, input: Value, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    """lstm.input(Tensor input, Tensor[] hx, Tensor[] params, bool has_biases, int num_layers, float dropout, bool train, bool bidirectional, bool batch_first) -> (Tensor, Tensor, Tensor)"""
    output, (h_n, c_n) = _recurrent(
        g, "LSTM", LSTM_GATES, input, list(hx), params, has_biases, num_layers, dropout, train,
        bidirectional, batch_first,
    )
    return output, h_n, c_n


@symbolic("aten::gru.input")
def gru(g: Graph, input: Value, hx: Value, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    """gru.input(Tensor input, Tensor hx, Tensor[] params, bool has_biases, int num_layers, float dropout, bool train, bool bidirectional, bool batch_first) -> (Tensor, Tensor)"""
    output, (h_n,) = _recurrent(
        g, "GRU", GRU_GATES, input, [hx], params, has_biases, num_layers, dropout, train,
        bidirectional, batch_first, linear_before_reset_i=1,
    )
    return output, h_n


def _rnn(g: Graph, activation: str, input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    output, (h_n,) = _recurrent(
        g, "RNN", RNN_GATES, input, [hx], params, has_biases, num_layers, dropout, train,
        bidirectional, batch_first, activations_s=[activation] * (2 if bidirectional else 1),
    )
    return output, h_n


@symbolic("aten::rnn_tanh.input")
def rnn_tanh(g: Graph, input: Value, hx: Value, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    """rnn_tanh.input(Tensor input, Tensor hx, Tensor[] params, bool has_biases, int num_layers, float dropout, bool train, bool bidirectional, bool batch_first) -> (Tensor, Tensor)"""
    return _rnn(g, "Tanh", input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)


@symbolic("aten::rnn_relu.input")
def rnn_relu(g: Graph, input: Value, hx: Value, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    """rnn_relu.input(Tensor input, Tensor hx, Tensor[] params, bool has_biases, int num_layers, float dropout, bool train, bool bidirectional, bool batch_first) -> (Tensor, Tensor)"""
    return _rnn(g, "Relu", input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)


# -- capture: keep the fused ops whole, with dynamic batch and sequence sizes ------------------


def _lstm_shapes(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    directions = 2 if bidirectional else 1
    output = input.new_empty((input.shape[0], input.shape[1], directions * hx[0].shape[2]))
    return output, hx[0].new_empty(hx[0].shape), hx[1].new_empty(hx[1].shape)


def _single_state_shapes(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    directions = 2 if bidirectional else 1
    output = input.new_empty((input.shape[0], input.shape[1], directions * hx.shape[2]))
    return output, hx.new_empty(hx.shape)


SHAPE_KERNELS = {
    "aten.lstm.input": _lstm_shapes,
    "aten.gru.input": _single_state_shapes,
    "aten.rnn_tanh.input": _single_state_shapes,
    "aten.rnn_relu.input": _single_state_shapes,
}


def _overload(target: str) -> Any:
    namespace, name, overload = normalize_target(target).split(".")
    return getattr(getattr(getattr(torch.ops, namespace), name), overload)


_PATCH_LOCK = threading.Lock()
"""Held while torch's RNN kernels are patched: a second capture waits instead of saving the
first one's patched kernels as the originals (and restoring those)."""


@contextmanager
def _shape_only_rnn_kernels(keep: frozenset) -> Iterator[None]:
    """Give the kept fused ops kernels that only compute output shapes, for the capture.

    torch traces CompositeImplicitAutograd ops through their Python decompositions (the py
    kernels and torch._decomp's table) even when they are kept whole; for the RNNs those loop
    over the sequence and specialise its length. Everything is restored on exit, on errors
    too (a patch half done included), under `_PATCH_LOCK`.
    """
    import torch._decomp as decomp
    import torch.nn.utils._expanded_weights  # noqa: F401  reads the table at import: import it unpatched

    keys = (torch._C.DispatchKey.CompositeImplicitAutograd, torch._C.DispatchKey.Autograd)
    with _PATCH_LOCK:
        saved = []
        try:
            for target, kernel in SHAPE_KERNELS.items():
                if target not in keep:
                    continue
                op = _overload(target)
                saved.append((op, op.py_kernels.copy(), op in decomp.decomposition_table,
                              decomp.decomposition_table.get(op)))
                for key in keys:
                    op.py_kernels[key] = kernel
                decomp.decomposition_table[op] = kernel
                op._dispatch_cache.clear()
            yield
        finally:
            for op, kernels, had_decomposition, decomposition in saved:
                op.py_kernels.clear()
                op.py_kernels.update(kernels)
                if had_decomposition:
                    decomp.decomposition_table[op] = decomposition
                else:
                    decomp.decomposition_table.pop(op, None)
                op._dispatch_cache.clear()


def _refuse_packed(module: torch.nn.Module, args: tuple[Any, ...]) -> None:
    if args and isinstance(args[0], torch.nn.utils.rnn.PackedSequence):
        raise ExportError(f"{type(module).__name__}: {PACKED_HINT}")


@capture_hook
@contextmanager
def rnn_capture(model: torch.nn.Module, keep: frozenset) -> Iterator[None]:
    """For a model holding a recurrent layer (nn.RNNBase): shape-only RNN kernels during the
    capture, and a clear refusal when the layer is fed a PackedSequence. Any other model is
    captured with torch untouched."""
    recurrent = [m for m in model.modules() if isinstance(m, torch.nn.RNNBase)]
    if not recurrent:
        yield
        return
    handles = [m.register_forward_pre_hook(_refuse_packed) for m in recurrent]
    try:
        with _shape_only_rnn_kernels(keep):
            yield
    finally:
        for handle in handles:
            handle.remove()
