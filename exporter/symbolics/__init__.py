"""Built-in symbolic functions, one module per op family. Importing registers them."""

from __future__ import annotations

from exporter.symbolics import (  # noqa: F401
    attention, conv, detection, elementwise, indexing, nn, pooling, reduction, resize, rnn, shape,
)
