"""Built-in symbolic functions, one module per op family. Importing registers them."""

from __future__ import annotations

from exporter.symbolics import conv, elementwise, indexing, nn, pooling, reduction, rnn, shape  # noqa: F401
