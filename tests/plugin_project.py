"""A user's project, as files, for the plugin's pytester tests: its own conftest with its own
`--device`, tests that use the `roundtrip` fixture and marker, a model with a planted divergence
(aten::relu exported as Sigmoid), and optionally a test that kills its process."""

from __future__ import annotations

import textwrap

CONFTEST = '''
import pytest


def pytest_addoption(parser):
    parser.addoption("--device", default="cpu", help="the project's own device option")


@pytest.fixture
def device(request):
    return request.config.getoption("--device")
'''

MODELS = '''
import torch

import exporter


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)
        self.act = torch.nn.ReLU()

    def forward(self, x):
        return self.act(self.fc(x))


def make():
    torch.manual_seed(0)
    return Net().eval(), (torch.randn(2, 8, generator=torch.Generator().manual_seed(1)),)


def planted(model, args):
    """The model exported with aten::relu translated as Sigmoid: a divergence at one op."""
    return exporter.export(model, args, custom_symbolics={"aten::relu": lambda g, x: g.op("Sigmoid", x)})
'''

TESTS = '''
import os

import pytest

from models import make, planted


def test_passes(roundtrip, device):
    assert device == "cpu"  # the project's own --device
    verification = roundtrip.verify(*make())
    assert verification.passed and verification.device == "cpu"


def test_planted_divergence(roundtrip):
    model, args = make()
    roundtrip.verify(model, args, onnx_model=planted(model, args))


@pytest.mark.roundtrip(atol=0.6, rtol=0.0)
def test_marker_tolerance_admits_the_divergence(roundtrip):
    model, args = make()
    verification = roundtrip.verify(model, args, onnx_model=planted(model, args))
    assert verification.passed and verification.outputs[0].atol == 0.6


@pytest.mark.roundtrip(opset=17)
def test_marker_opset(roundtrip):
    verification = roundtrip.verify(*make())
    assert [o.version for o in verification.onnx_model.opset_import if o.domain == ""] == [17]


def test_verify_onnx_file(roundtrip, tmp_path):
    import onnx

    import exporter

    model, args = make()
    path = tmp_path / "net.onnx"
    onnx.save(exporter.export(model, args), path)
    expected = model(*args).detach().numpy()
    assert roundtrip.verify_onnx(str(path), [args[0].numpy()], expected=[expected]).passed


@pytest.mark.parametrize("where", ["cuda", "cpu"])
def test_parameter_named_cuda_runs(where):
    assert where in ("cuda", "cpu")


@pytest.mark.cuda
def test_marked_cuda():
    pass
'''

MANY_PASSING = '''
import pytest

from models import make


@pytest.mark.parametrize("seed", range(6))
def test_passes(roundtrip, seed):
    roundtrip.verify(*make(), name=f"net seed {seed}")
'''

ABORT = '''
import os


def test_abort():
    os.abort()
'''


def files(*, abort: bool = False, many: bool = False) -> dict[str, str]:
    """{file name: text} of the project; `many` adds six passing roundtrip tests, `abort` a test
    that kills the process running it."""
    found = {"conftest.py": CONFTEST, "models.py": MODELS, "test_models.py": TESTS}
    if many:
        found["test_many.py"] = MANY_PASSING
    if abort:
        found["test_abort.py"] = ABORT
    return {name: textwrap.dedent(text).lstrip() for name, text in found.items()}
