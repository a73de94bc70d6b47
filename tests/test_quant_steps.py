"""Quantization-step errors (harness.metrics.quant_steps): distances, ties and saturation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.metrics.quant_steps import QuantSteps, quant_steps

INT8 = {"qmin": -128, "qmax": 127}
UINT8 = {"qmin": 0, "qmax": 255}


@pytest.mark.parametrize("name, actual, expected, params, want", [
    # (max_steps, off_by_one_or_more, elements, at_ties, at_saturation)
    ("identical integers", np.array([1, -2, 3], np.int8), np.array([1, -2, 3], np.int8),
     dict(scale=0.1, **INT8), (0.0, 0, 3, 0, 0)),
    ("float reference rounded half to even", np.array([0, 2, 2, -2], np.int8), np.array([0.0, 1.5, 2.5, -2.5]),
     dict(scale=1.0, **INT8), (0.0, 0, 4, 0, 0)),
    ("half away from zero is one step off, at a tie", np.array([1, 3], np.int8), np.array([0.5, 2.5]),
     dict(scale=1.0, **INT8), (1.0, 2, 2, 2, 0)),
    ("an arithmetic error is not a tie", np.array([5], np.int8), np.array([3.2]),
     dict(scale=1.0, **INT8), (2.0, 1, 1, 0, 0)),
    ("dequantized floats on the scale's grid", np.array([0.2, 0.4, 0.7]), np.array([0.2, 0.4, 0.6]),
     dict(scale=0.1, **INT8), (1.0, 1, 3, 0, 0)),
    ("zero point shifts the grid", np.array([130, 128], np.uint8), np.array([0.25, 0.0]),
     dict(scale=0.125, zero_point=128, **UINT8), (0.0, 0, 2, 0, 0)),
    ("saturated reference agrees at the bound", np.array([127], np.int8), np.array([400.0]),
     dict(scale=1.0, **INT8), (0.0, 0, 1, 0, 0)),
    ("saturated reference, backend wrapped", np.array([-128], np.int8), np.array([400.0]),
     dict(scale=1.0, **INT8), (255.0, 1, 1, 0, 1)),
    ("backend saturates where the reference does not", np.array([127], np.int8), np.array([120.0]),
     dict(scale=1.0, **INT8), (7.0, 1, 1, 0, 1)),
    ("sub-step float error is not a step", np.array([0.1 + 1e-9]), np.array([0.1]),
     dict(scale=0.1, **INT8), (0.0, 0, 1, 0, 0)),
])
def test_quant_steps(name, actual, expected, params, want):
    steps = quant_steps(actual, expected, **params)
    got = (steps.max_steps, steps.off_by_one_or_more, steps.elements, steps.at_ties, steps.at_saturation)
    assert got == pytest.approx(want), name


def test_nonfinite_actual_is_off_by_infinitely_many_steps():
    steps = quant_steps(np.array([np.nan, 1.0]), np.array([1.0, 1.0]), scale=1.0, **INT8)
    assert math.isinf(steps.max_steps) and steps.off_by_one_or_more == 1


def test_to_dict_and_fraction():
    steps = quant_steps(np.array([1, 3], np.int8), np.array([0.5, 2.0]), scale=0.5, **INT8)
    assert steps.off_fraction == 0.5
    assert steps.to_dict() == {"scale": 0.5, "zero_point": 0, "qmin": -128, "qmax": 127, "max_steps": 1.0,
                               "off_by_one_or_more": 1, "elements": 2, "at_ties": 0, "at_saturation": 0}
    assert isinstance(steps, QuantSteps)


@pytest.mark.parametrize("kwargs, message", [
    (dict(scale=0.0), "positive finite"),
    (dict(scale=1.0, qmin=5, qmax=5), "range is empty"),
])
def test_bad_parameters_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        quant_steps(np.zeros(2), np.zeros(2), **kwargs)


def test_shapes_must_agree():
    with pytest.raises(ValueError, match="shapes differ"):
        quant_steps(np.zeros(2), np.zeros(3), scale=1.0)
