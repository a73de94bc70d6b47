"""Built-in symbolic functions, one module per op family. Importing registers them."""

from __future__ import annotations

from exporter.symbolics import (  # noqa: F401
    attention, bitwise, conv, creation, elementwise, embedding_bag, indexing, linalg, nn, pooling, reduction,
    resize, resize_kernels, rnn, scatter, shape, sorting, statistics, unary_math,
)
