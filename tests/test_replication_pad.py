"""replication_pad's two translations: ONNX Pad (mode 'edge') wherever it can pad, a Gather of
clamped indices on an axis whose negative pads may crop it to nothing (onnxruntime's edge Pad
refuses such an axis; torch replicates the border the crop reaches). The op table's
replication_pad rows check the numbers; this table pins which translation each form gets, so
the plain Pad of ordinary replicate padding stays as it was."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnxruntime as ort
import pytest
import torch
import torch.nn.functional as F

import exporter


class _Pad(torch.nn.Module):
    def __init__(self, pads: tuple[int, ...]) -> None:
        super().__init__()
        self.pads = pads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.pad(x, self.pads, mode="replicate")


# (name, pads, input shape, dynamic axes of the input, Pad and Gather nodes the export holds)
FORMS = [
    ("positive", (2, 1, 0, 3), (1, 2, 3, 4), None, {"Pad": 1}),
    ("negative_leaving_elements", (-1, 2, 3, -2), (2, 4, 5), None, {"Pad": 1}),
    ("crop_to_nothing", (-3, 2), (2, 3, 3), None, {"Gather": 1}),
    ("crop_past_the_axis", (-5, 4), (2, 3, 3), None, {"Gather": 1}),
    ("crop_one_axis_pad_another", (2, -6, -1, 3), (1, 2, 4, 5), None, {"Gather": 1, "Pad": 1}),
    ("crop_two_axes_3d", (-4, 1, 1, -3, 0, -2), (1, 2, 3, 3, 4), None, {"Gather": 2, "Pad": 1}),
    ("symbolic_positive", (1, 2), (2, 3, 6), {2: "w"}, {"Pad": 1}),
    ("symbolic_negative", (-3, 2), (2, 3, 6), {2: "w"}, {"Gather": 1}),
]


@pytest.mark.parametrize(("pads", "shape", "dynamic", "nodes"), [f[1:] for f in FORMS], ids=[f[0] for f in FORMS])
def test_replication_pad_translation(pads, shape, dynamic, nodes) -> None:
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    model = exporter.export(_Pad(pads), (x,), opset_version=18, dynamic_axes={"x": dynamic} if dynamic else None)
    counts = Counter(n.op_type for n in model.graph.node if n.op_type in ("Pad", "Gather"))
    assert counts == nodes
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    sizes = [shape[-1], 3, 2] if dynamic else [shape[-1]]  # symbolic: also crops to nothing and past
    for size in sizes:
        sample = torch.randn((*shape[:-1], size), generator=torch.Generator().manual_seed(size))
        (got,) = session.run(None, {session.get_inputs()[0].name: sample.numpy()})
        np.testing.assert_array_equal(got, F.pad(sample, pads, mode="replicate").numpy())
