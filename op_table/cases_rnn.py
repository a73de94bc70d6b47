"""Op table rows for the recurrent layers: nn.LSTM, nn.GRU, nn.RNN (tanh, relu).

Every kind in every form: 1 or 2 layers, one or two directions, batch_first or not, with the
initial state given or left to torch's zeros. Outputs and the returned hidden (and cell) states
must match torch within RNN_ATOL absolute, at every opset. Sizes are small and distinct (seq 5,
batch 3, features 4, hidden 6) so a transposed axis cannot go unnoticed.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import torch
from torch import nn

from op_table.schema import OpCase

RNN_ATOL = 1e-5  # the recurrent layers' contract: max abs error on outputs and states
WEIGHT_SEED = 0
SEQ, BATCH, FEATURES, HIDDEN = 5, 3, 4, 6

TARGETS = {
    "LSTM": "aten.lstm.input",
    "GRU": "aten.gru.input",
    "RNN_TANH": "aten.rnn_tanh.input",
    "RNN_RELU": "aten.rnn_relu.input",
}


class Recurrent(nn.Module):
    """A recurrent layer taking its initial state as separate inputs, returning a flat tuple."""

    def __init__(self, rnn: nn.RNNBase) -> None:
        super().__init__()
        self.rnn = rnn

    def forward(self, x: torch.Tensor, h0: torch.Tensor | None = None, c0: torch.Tensor | None = None):
        if h0 is None:
            output, state = self.rnn(x)
        elif c0 is None:
            output, state = self.rnn(x, h0)
        else:
            output, state = self.rnn(x, (h0, c0))
        return (output, *state) if isinstance(state, tuple) else (output, state)


class PackedLSTM(nn.Module):
    """An LSTM fed a PackedSequence: torch.export cannot capture it, the exporter says so."""

    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.LSTM(FEATURES, HIDDEN)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lengths = [x.shape[0]] + [max(1, x.shape[0] - 2)] * (x.shape[1] - 1)
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths)
        return nn.utils.rnn.pad_packed_sequence(self.rnn(packed)[0])[0]


def build_rnn(kind: str, *, layers: int = 1, bidirectional: bool = False, batch_first: bool = False,
              bias: bool = True, features: int = FEATURES, hidden: int = HIDDEN, **extra) -> nn.RNNBase:
    options = dict(num_layers=layers, bidirectional=bidirectional, batch_first=batch_first, bias=bias, **extra)
    if kind == "LSTM":
        return nn.LSTM(features, hidden, **options)
    if kind == "GRU":
        return nn.GRU(features, hidden, **options)
    return nn.RNN(features, hidden, nonlinearity="tanh" if kind == "RNN_TANH" else "relu", **options)


def recurrent_module(kind: str, **options) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(WEIGHT_SEED)
            return Recurrent(build_rnn(kind, **options))

    return build


def recurrent_inputs(kind: str, *, layers: int = 1, bidirectional: bool = False, batch_first: bool = False,
                     with_state: bool = False, seq: int = SEQ, batch: int | None = BATCH, features: int = FEATURES,
                     hidden: int = HIDDEN, **_: object) -> Callable[[torch.Generator], tuple[torch.Tensor, ...]]:
    """x (and h0[, c0] with_state), seeded; batch=None makes them unbatched, as torch allows."""
    batch_axis = () if batch is None else (batch,)

    def make(gen: torch.Generator) -> tuple[torch.Tensor, ...]:
        x_shape = (*batch_axis, seq, features) if batch_first else (seq, *batch_axis, features)
        x = torch.randn(x_shape, generator=gen)
        if not with_state:
            return (x,)
        state_shape = (layers * (2 if bidirectional else 1), *batch_axis, hidden)
        states = [torch.randn(state_shape, generator=gen) for _ in range(2 if kind == "LSTM" else 1)]
        return (x, *states)

    return make


def rnn_case(kind: str, *, with_state: bool = False, dynamic: bool = False, unbatched: bool = False,
             name: str | None = None, **options) -> OpCase:
    layers = options.get("layers", 1)
    parts = [kind.lower(), f"{layers}layer"]
    parts += ["bidir"] if options.get("bidirectional") else []
    parts += ["batch_first"] if options.get("batch_first") else []
    parts += ["h0"] if with_state else []
    parts += ["no_bias"] if options.get("bias") is False else []
    parts += ["dynamic"] if dynamic else []
    parts += ["unbatched"] if unbatched else []
    dynamic_axes = None
    if dynamic:
        seq_axis, batch_axis = (1, 0) if options.get("batch_first") else (0, 1)
        dynamic_axes = {"x": {seq_axis: "seq", batch_axis: "batch"}}
        if with_state:
            dynamic_axes.update({state: {1: "batch"} for state in (["h0", "c0"] if kind == "LSTM" else ["h0"])})
    return OpCase(
        name or "_".join(parts),
        recurrent_module(kind, **options),
        recurrent_inputs(kind, with_state=with_state, batch=None if unbatched else BATCH, **options),
        targets=(TARGETS[kind],),
        seed_ops=("RNN",),
        atol=RNN_ATOL,
        rtol=0.0,
        dynamic_axes=dynamic_axes,
        tags=("rnn", kind.lower()),
    )


# Every (layers, bidirectional, batch_first) combination per kind; the initial state is given in
# half of them, chosen so that every pair of the four options meets in every combination.
FORM_CASES = [
    rnn_case(kind, layers=layers, bidirectional=bidirectional, batch_first=batch_first,
             with_state=(layers == 2) ^ bidirectional ^ batch_first)
    for kind, layers, bidirectional, batch_first in itertools.product(TARGETS, (1, 2), (False, True), (False, True))
]

EXTRA_CASES = [
    *(rnn_case(kind, layers=2, bidirectional=True, bias=False, with_state=True) for kind in TARGETS),
    *(rnn_case(kind, layers=2, bidirectional=True, with_state=True, dynamic=True) for kind in TARGETS),
    *(rnn_case(kind, layers=2, batch_first=True, dynamic=True) for kind in TARGETS),
    rnn_case("LSTM", layers=2, bidirectional=True, with_state=True, unbatched=True),
    rnn_case("GRU", batch_first=True, unbatched=True),
    OpCase(
        "lstm_packed_sequence_refused", PackedLSTM, recurrent_inputs("LSTM"),
        targets=(TARGETS["LSTM"],), refused="packed sequences",
    ),
    OpCase(
        "lstm_proj_size_refused", recurrent_module("LSTM", proj_size=3), recurrent_inputs("LSTM"),
        targets=(TARGETS["LSTM"],), refused="proj_size > 0 has no ONNX equivalent",
    ),
]

CASES: list[OpCase] = FORM_CASES + EXTRA_CASES
