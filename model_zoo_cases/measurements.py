"""Measured numbers behind every case's tolerance and activation bound.

Source: torch 2.14.1 (CPU, fp32), torch.onnx.export(dynamo=True) with the case's
dynamic axes, onnxruntime 1.31.1 CPUExecutionProvider; x86-64, 2 threads.
Module seed 0; ORT error is the worst |ORT - torch| over every output at the
traced and the other batch size, input seeds 1-3. Activation maxima are
eval-mode max |output| over every leaf module, input seed 0, traced batch.
`raw_activation_max` is the same for the module straight from `build_fn`
(before BatchNorm calibration / weight rescaling): Inception v3 reaches 1e12.

Rules (applied in the registry, so the numbers stay the single source):
* atol = 10x the measured ORT error, rounded up to one significant digit, at
  least ATOL_FLOOR; rtol = RTOL for every case. Measured relative errors are
  1e-7..3e-5 of the output scale; rtol 1e-4 leaves >=3x headroom on the worst
  (inception_v3) and ~100x on most, while a wrong epsilon or a dropped bias
  (errors ~1e-3 relative and up) still fails.
* activation_bound = 10x the measured activation maximum, rounded up to one
  significant digit.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

HEADROOM = 10.0
ATOL_FLOOR = 1e-5
RTOL = 1e-4
SOURCE = (
    "torch 2.14.1 CPU fp32 vs onnxruntime 1.31.1 CPU on torch.onnx dynamo export; module seed 0, "
    "input seeds 1-3, traced and other batch; 2-thread x86-64"
)


@dataclasses.dataclass(frozen=True)
class Measured:
    """What one case measured; see the module docstring for the conditions."""

    params: int
    activation_max: float
    raw_activation_max: float
    ort_max_abs_error: float
    output_scale: float

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "source": SOURCE}


def round_up_1sig(value: float) -> float:
    """Round a positive number up to one significant digit (2.17e-3 -> 3e-3)."""
    exponent = math.floor(math.log10(value))
    mantissa = math.ceil(round(value / 10**exponent, 9))
    return float(f"{mantissa}e{exponent}")


def atol_for(measured: Measured) -> float:
    return max(ATOL_FLOOR, round_up_1sig(HEADROOM * measured.ort_max_abs_error))


def activation_bound_for(measured: Measured) -> float:
    return round_up_1sig(HEADROOM * measured.activation_max)


# fmt: off
MEASUREMENTS: dict[str, Measured] = {
    "alexnet": Measured(params=61100840, activation_max=5.42, raw_activation_max=2.36, ort_max_abs_error=3.13e-06, output_scale=3.23),
    "resnet18": Measured(params=11689512, activation_max=8.18, raw_activation_max=2.03, ort_max_abs_error=5.36e-07, output_scale=0.84),
    "resnet34": Measured(params=21797672, activation_max=8.29, raw_activation_max=2.36, ort_max_abs_error=6.56e-07, output_scale=1.08),
    "resnet50": Measured(params=25557032, activation_max=13.2, raw_activation_max=1.72, ort_max_abs_error=9.69e-07, output_scale=0.948),
    "resnet101": Measured(params=44549160, activation_max=16.2, raw_activation_max=2.28, ort_max_abs_error=1.61e-06, output_scale=0.898),
    "resnet152": Measured(params=60192808, activation_max=17.5, raw_activation_max=3.17, ort_max_abs_error=3.35e-06, output_scale=0.894),
    "resnext50_32x4d": Measured(params=25028904, activation_max=10.1, raw_activation_max=1.51, ort_max_abs_error=9.09e-07, output_scale=1.11),
    "resnext101_32x8d": Measured(params=88791336, activation_max=8.51, raw_activation_max=1.41, ort_max_abs_error=1.79e-06, output_scale=1.11),
    "wide_resnet50_2": Measured(params=68883240, activation_max=9.92, raw_activation_max=1.94, ort_max_abs_error=8.94e-07, output_scale=0.965),
    "wide_resnet101_2": Measured(params=126886696, activation_max=11.8, raw_activation_max=1.56, ort_max_abs_error=1.88e-06, output_scale=1.23),
    "vgg11": Measured(params=132863336, activation_max=6.49, raw_activation_max=1.61, ort_max_abs_error=3.58e-06, output_scale=3.33),
    "vgg13": Measured(params=133047848, activation_max=7.12, raw_activation_max=1.53, ort_max_abs_error=3.17e-06, output_scale=3.3),
    "vgg16": Measured(params=138357544, activation_max=6.71, raw_activation_max=1.63, ort_max_abs_error=3.56e-06, output_scale=3.84),
    "vgg19": Measured(params=143667240, activation_max=7.09, raw_activation_max=1.71, ort_max_abs_error=4.41e-06, output_scale=3.4),
    "vgg11_bn": Measured(params=132868840, activation_max=7.82, raw_activation_max=1.61, ort_max_abs_error=3.46e-06, output_scale=1.56),
    "vgg13_bn": Measured(params=133053736, activation_max=7.78, raw_activation_max=1.53, ort_max_abs_error=4.77e-06, output_scale=1.52),
    "vgg16_bn": Measured(params=138365992, activation_max=7.95, raw_activation_max=1.63, ort_max_abs_error=9.66e-06, output_scale=1.39),
    "vgg19_bn": Measured(params=143678248, activation_max=8.19, raw_activation_max=1.71, ort_max_abs_error=1.67e-05, output_scale=1.61),
    "densenet121": Measured(params=7978856, activation_max=7.69, raw_activation_max=11, ort_max_abs_error=1.62e-06, output_scale=0.801),
    "densenet161": Measured(params=28681000, activation_max=8.62, raw_activation_max=10.6, ort_max_abs_error=2.47e-06, output_scale=0.835),
    "densenet169": Measured(params=14149480, activation_max=8.14, raw_activation_max=11, ort_max_abs_error=2.18e-06, output_scale=0.951),
    "densenet201": Measured(params=20013928, activation_max=8.06, raw_activation_max=12.5, ort_max_abs_error=2.61e-06, output_scale=0.908),
    # Untrained, BN-calibrated Inception v3 is ill-conditioned: torch fp32 vs
    # torch fp64 alone differ by 1.6e-4, as much as ORT does.
    "inception_v3": Measured(params=23834568, activation_max=22.8, raw_activation_max=1.03e+12, ort_max_abs_error=0.000217, output_scale=7.25),
    "dcgan_generator": Measured(params=3576704, activation_max=5.22, raw_activation_max=0.768, ort_max_abs_error=9.91e-07, output_scale=0.829),
    "dcgan_discriminator": Measured(params=2765568, activation_max=5.64, raw_activation_max=0.504, ort_max_abs_error=4.17e-07, output_scale=0.962),
    "superresolution": Measured(params=59657, activation_max=2.5, raw_activation_max=2.5, ort_max_abs_error=4.77e-07, output_scale=1.16),
    "word_language_model_lstm": Measured(params=1044200, activation_max=5.09, raw_activation_max=3.76, ort_max_abs_error=2.38e-06, output_scale=7.06),
    "word_language_model_gru": Measured(params=883400, activation_max=5.03, raw_activation_max=3.76, ort_max_abs_error=2.15e-06, output_scale=4.69),
    "word_language_model_rnn_tanh": Measured(params=561800, activation_max=4.48, raw_activation_max=3.76, ort_max_abs_error=2.74e-06, output_scale=5.17),
    "word_language_model_rnn_relu": Measured(params=561800, activation_max=4.27, raw_activation_max=3.76, ort_max_abs_error=2.38e-06, output_scale=4.73),
    "word_language_model_lstm_tied": Measured(params=844200, activation_max=6.37, raw_activation_max=6.37, ort_max_abs_error=3.34e-06, output_scale=8.4),
}
# fmt: on
