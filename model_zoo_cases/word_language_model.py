"""Word-level recurrent language model: embedding -> RNN -> linear decoder.

The usual PTB/WikiText-2 architecture, with a flat-tensor interface so every
exporter can take it: tokens are (seq, batch) int64 (sequence first), the
hidden state comes in as separate tensors of shape (nlayers, batch, nhid), and
forward returns a flat tuple: (logits, h) or, for LSTM, (logits, h, c).
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn

RNNType = Literal["LSTM", "GRU", "RNN_TANH", "RNN_RELU"]
RNN_TYPES: tuple[str, ...] = ("LSTM", "GRU", "RNN_TANH", "RNN_RELU")


class RNNModel(nn.Module):
    """Embedding, dropout, multi-layer RNN, dropout, linear decoder to `ntoken` logits."""

    def __init__(
        self,
        rnn_type: RNNType,
        ntoken: int,
        ninp: int,
        nhid: int,
        nlayers: int = 2,
        dropout: float = 0.2,
        tie_weights: bool = False,
    ) -> None:
        super().__init__()
        if rnn_type not in RNN_TYPES:
            raise ValueError(f"rnn_type must be one of {RNN_TYPES}, got {rnn_type!r}")
        if tie_weights and ninp != nhid:
            raise ValueError("tie_weights needs ninp == nhid (the decoder reuses the embedding matrix)")
        self.rnn_type = rnn_type
        self.ntoken, self.ninp, self.nhid, self.nlayers = ntoken, ninp, nhid, nlayers
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        rnn_dropout = dropout if nlayers > 1 else 0.0
        if rnn_type == "LSTM":
            self.rnn: nn.RNNBase = nn.LSTM(ninp, nhid, nlayers, dropout=rnn_dropout)
        elif rnn_type == "GRU":
            self.rnn = nn.GRU(ninp, nhid, nlayers, dropout=rnn_dropout)
        else:
            nonlinearity = "tanh" if rnn_type == "RNN_TANH" else "relu"
            self.rnn = nn.RNN(ninp, nhid, nlayers, nonlinearity=nonlinearity, dropout=rnn_dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        # PyTorch's default inits throughout: N(0, 1) embeddings keep the RNN's
        # gates in their nonlinear range (the common U(-0.1, 0.1) init leaves an
        # untrained model almost linear, which would test little).
        if tie_weights:
            self.decoder.weight = self.encoder.weight

    @property
    def is_lstm(self) -> bool:
        return self.rnn_type == "LSTM"

    def forward(
        self, tokens: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, ...]:
        """tokens (seq, batch) int64, h0/c0 (nlayers, batch, nhid) -> (logits, h[, c]).

        logits have shape (seq, batch, ntoken).
        """
        embedded = self.drop(self.encoder(tokens))
        if self.is_lstm:
            if c0 is None:
                raise ValueError("an LSTM model needs c0")
            output, (h, c) = self.rnn(embedded, (h0, c0))
            return self.decoder(self.drop(output)), h, c
        if c0 is not None:
            raise ValueError(f"a {self.rnn_type} model takes no c0")
        output, h = self.rnn(embedded, h0)
        return self.decoder(self.drop(output)), h
