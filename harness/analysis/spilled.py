"""Reproducer tensors moved out of memory: written to a scratch folder and read back mapped.

When torch's values are streamed, the ops whose reproducers a report may write keep their
inputs and expected outputs (views that would hold torch's values in memory until the report
is written, for as many ops as a report writes reproducers for: a detector at 800 px holds
hundreds of MB that way). `spill` writes them to `.npy` files as they are made and replaces
them with read-only memory maps of those files: the page cache holds them, not the process,
and the reproducer reads them from there. The folder goes when the last artifact using it does.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from typing import Any

import numpy as np

from harness.analysis.rows import OpArtifacts
from harness.metrics.arrays import flat_blocks

SPILLED_MIN_BYTES = 1 << 20
"""Arrays smaller than this stay in memory (writing them costs more than they hold)."""
WRITTEN_BLOCK = 1 << 20
"""Elements written at a time: an array that is not contiguous (an expanded index of a
detector's mask paste, 366 MiB as int64 over a few KiB of storage) is never copied whole."""


class SpillFolder:
    """A scratch folder for spilled arrays, removed when no artifact refers to it any more."""

    def __init__(self) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="roundtrip-artifacts-")
        self._count = 0

    def write(self, array: np.ndarray) -> np.ndarray:
        """`array` written to a file of this folder, returned as a read-only memory map of it."""
        path = os.path.join(self._folder.name, f"{self._count}.npy")
        self._count += 1
        with open(path, "wb") as handle:  # in C order, a view that is not contiguous a block at a time
            np.lib.format.write_array_header_1_0(handle, {"descr": np.lib.format.dtype_to_descr(array.dtype),
                                                          "fortran_order": False, "shape": array.shape})
            for (block,) in flat_blocks((array.reshape(1) if array.ndim == 0 else array,), WRITTEN_BLOCK):
                handle.write(np.ascontiguousarray(block).data)
        return np.load(path, mmap_mode="r", allow_pickle=False)


def _spilled(arrays: Mapping[str, Any], folder: SpillFolder) -> dict[str, Any]:
    return {name: folder.write(array) if isinstance(array, np.ndarray) and not isinstance(array, np.memmap)
            and array.dtype.kind != "O" and array.nbytes >= SPILLED_MIN_BYTES else array
            for name, array in arrays.items()}


def spill(artifacts: OpArtifacts, folder: SpillFolder) -> None:
    """Move `artifacts`' large inputs, expected and isolated outputs to `folder` (once: arrays
    already mapped stay as they are); the artifacts keep the folder alive."""
    artifacts.inputs = _spilled(artifacts.inputs, folder)
    artifacts.expected = _spilled(artifacts.expected, folder)
    artifacts.isolated_outputs = _spilled(artifacts.isolated_outputs, folder)
    artifacts.spill_folder = folder
