"""Capture without a second trace (exporter.capturing.functionalize): the local rewrites must give the
program torch's decomposition gives, and refuse whatever they cannot prove safe."""

from __future__ import annotations

import collections

import pytest
import torch

import exporter
from exporter.capturing import functionalize, trace
from exporter.translate.registry import Dispatcher

KEEP = frozenset(Dispatcher(exporter.DEFAULT_OPSET).known_targets())


class _Block(torch.nn.Module):
    """relu_, add_ on a fresh value, eval batch_norm, eval dropout, flatten."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)
        self.relu = torch.nn.ReLU(inplace=True)
        self.drop = torch.nn.Dropout(0.5)
        self.fc = torch.nn.Linear(4 * 8 * 8, 5)

    def forward(self, x):
        y = self.relu(self.bn(self.conv(x)))
        y += self.conv(x)
        return self.fc(self.drop(torch.flatten(y, 1)))


class _MutatesAView(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        view = y[:, :2]
        view.relu_()  # changes y through the view
        return y + 1


class _ReadsBeforeMutation(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        z = y.clone()  # read before the mutation: the rewrite is safe
        y.relu_()
        return y + z + y.sum()


class _MutatesTheInput(torch.nn.Module):
    def forward(self, x):
        x.relu_()
        return x + 1


class _TrainingDropout(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.dropout(x * 2, 0.5, training=True)


def _capture(module, args, *, rewrite: bool):
    original = functionalize.rewrite
    if not rewrite:
        functionalize.rewrite = lambda program, keep: False
    try:
        return exporter.capture(module, args, dynamic_axes={"x": {0: "batch"}})
    finally:
        functionalize.rewrite = original


def _targets(program) -> collections.Counter:
    return collections.Counter(str(n.target) for n in program.graph.nodes if n.op == "call_function")


def test_rewrites_give_what_the_decomposition_gives():
    torch.manual_seed(0)
    module = _Block().eval()
    args = (torch.randn(2, 3, 8, 8),)
    raw = _training_ir(module, args)
    assert {"aten.relu_.default", "aten.add_.Tensor", "aten.batch_norm.default", "aten.dropout.default",
            "aten.flatten.using_ints"} <= set(_targets(raw))
    fast, slow = _capture(module, args, rewrite=True), _capture(module, args, rewrite=False)
    assert _targets(fast) == _targets(slow)
    assert not any(str(n.target).endswith("_.default") or "_.Tensor" in str(n.target) for n in fast.graph.nodes)
    assert fast.graph_signature.input_specs == slow.graph_signature.input_specs
    assert fast.graph_signature.output_specs == slow.graph_signature.output_specs
    x = torch.randn(3, 3, 8, 8)  # another batch size: the flatten's symbolic size is read, not fixed
    with torch.no_grad():
        torch.testing.assert_close(fast.module()(x), module(x), rtol=0, atol=0)
        torch.testing.assert_close(slow.module()(x), module(x), rtol=0, atol=0)


def test_rewritten_nodes_are_named_and_placed_as_torch_names_them():
    module = _Block().eval()
    program = _capture(module, (torch.randn(2, 3, 8, 8),), rewrite=True)
    names = [n.name for n in program.graph.nodes if n.op == "call_function"]
    assert "relu" in names and "_native_batch_norm_legit_no_training" in names and "add" in names
    relu = next(n for n in program.graph.nodes if n.name == "relu")
    assert relu.meta["nn_module_stack"] and "stack_trace" in relu.meta  # provenance kept


def _training_ir(module: torch.nn.Module, args) -> torch.export.ExportedProgram:
    with trace.eval_mode(module):
        return torch.export.export(module, args, strict=False)


def test_a_mutation_seen_through_a_view_is_decomposed_by_torch():
    module, args = _MutatesAView(), (torch.randn(2, 4),)
    assert not functionalize.rewrite(_training_ir(module, args), KEEP)
    program = exporter.capture(module, args)
    with torch.no_grad():
        torch.testing.assert_close(program.module()(*args), module(*args), rtol=0, atol=0)


def test_a_value_read_before_its_mutation_is_rewritten():
    module, args = _ReadsBeforeMutation(), (torch.randn(2, 4),)
    raw = _training_ir(module, args)
    assert functionalize.rewrite(raw, KEEP)
    assert "aten.relu.default" in _targets(raw) and "aten.relu_.default" not in _targets(raw)
    with torch.no_grad():
        torch.testing.assert_close(raw.module()(*args), module(*args), rtol=0, atol=0)


def test_dropout_in_training_is_decomposed_by_torch():
    raw = _training_ir(_TrainingDropout(), (torch.randn(2, 4),))
    assert not functionalize.rewrite(raw, KEEP)
    assert "aten.dropout.default" in _targets(raw)  # left as it was


def test_a_mutated_input_is_left_to_torch():
    assert not functionalize.rewrite(_training_ir(_MutatesTheInput(), (torch.randn(2, 4),)), KEEP)


class _EndsInPlace(torch.nn.Module):
    """The graph's output is a rewritten node (and a dropout's input is returned too)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.drop = torch.nn.Dropout(0.2)

    def forward(self, x):
        y = self.conv(x)
        return torch.flatten(torch.relu_(y), 1), self.drop(y * 2)


def test_outputs_rewritten_keep_the_signature_in_step():
    module, args = _EndsInPlace().eval(), (torch.randn(2, 3, 6, 6),)
    raw = _training_ir(module, args)
    assert functionalize.rewrite(raw, KEEP)
    outputs = next(n for n in raw.graph.nodes if n.op == "output").args[0]
    assert [spec.arg.name for spec in raw.graph_signature.output_specs] == [n.name for n in outputs]
    with torch.no_grad():
        for actual, expected in zip(raw.module()(*args), module(*args)):
            torch.testing.assert_close(actual, expected, rtol=0, atol=0)
    onnx_model = exporter.export(module, args)
    assert len(onnx_model.graph.output) == 2
