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
_ROWS: tuple[tuple[str, int, float, float, float, float], ...] = (
    # name                             params  act max  raw act max  ORT err  out scale
    ("alexnet",                        61100840,  5.42,     2.36,  3.13e-06,  3.23),
    ("resnet18",                       11689512,  8.18,     2.03,  5.36e-07,  0.84),
    ("resnet34",                       21797672,  8.29,     2.36,  6.56e-07,  1.08),
    ("resnet50",                       25557032,  13.2,     1.72,  9.69e-07, 0.948),
    ("resnet101",                      44549160,  16.2,     2.28,  1.61e-06, 0.898),
    ("resnet152",                      60192808,  17.5,     3.17,  3.35e-06, 0.894),
    ("resnext50_32x4d",                25028904,  10.1,     1.51,  9.09e-07,  1.11),
    ("resnext101_32x8d",               88791336,  8.51,     1.41,  1.79e-06,  1.11),
    ("wide_resnet50_2",                68883240,  9.92,     1.94,  8.94e-07, 0.965),
    ("wide_resnet101_2",              126886696,  11.8,     1.56,  1.88e-06,  1.23),
    ("vgg11",                         132863336,  6.49,     1.61,  3.58e-06,  3.33),
    ("vgg13",                         133047848,  7.12,     1.53,  3.17e-06,   3.3),
    ("vgg16",                         138357544,  6.71,     1.63,  3.56e-06,  3.84),
    ("vgg19",                         143667240,  7.09,     1.71,  4.41e-06,   3.4),
    ("vgg11_bn",                      132868840,  7.82,     1.61,  3.46e-06,  1.56),
    ("vgg13_bn",                      133053736,  7.78,     1.53,  4.77e-06,  1.52),
    ("vgg16_bn",                      138365992,  7.95,     1.63,  9.66e-06,  1.39),
    ("vgg19_bn",                      143678248,  8.19,     1.71,  1.67e-05,  1.61),
    ("densenet121",                     7978856,  7.69,       11,  1.62e-06, 0.801),
    ("densenet161",                    28681000,  8.62,     10.6,  2.47e-06, 0.835),
    ("densenet169",                    14149480,  8.14,       11,  2.18e-06, 0.951),
    ("densenet201",                    20013928,  8.06,     12.5,  2.61e-06, 0.908),
    # Untrained, BN-calibrated Inception v3 is ill-conditioned: torch fp32 vs
    # torch fp64 alone differ by 1.6e-4, as much as ORT does.
    ("inception_v3",                   23834568,  22.8, 1.03e+12,  0.000217,  7.25),
    ("dcgan_generator",                 3576704,  5.22,    0.768,  9.91e-07, 0.829),
    ("dcgan_discriminator",             2765568,  5.64,    0.504,  4.17e-07, 0.962),
    ("superresolution",                   59657,   2.5,      2.5,  4.77e-07,  1.16),
    ("word_language_model_lstm",        1044200,  5.09,     3.76,  2.38e-06,  7.06),
    ("word_language_model_gru",          883400,  5.03,     3.76,  2.15e-06,  4.69),
    ("word_language_model_rnn_tanh",     561800,  4.48,     3.76,  2.74e-06,  5.17),
    ("word_language_model_rnn_relu",     561800,  4.27,     3.76,  2.38e-06,  4.73),
    ("word_language_model_lstm_tied",    844200,  6.37,     6.37,  3.34e-06,   8.4),
)
# fmt: on

MEASUREMENTS: dict[str, Measured] = {name: Measured(*values) for name, *values in _ROWS}


# -- the extended tier ---------------------------------------------------------------------------
# Extended cases (every other torchvision model, at the small sizes of
# model_zoo_cases/torchvision_extended.py) are judged by the same rules once measured; their
# numbers come from tools/gen_coverage.py's run (torch 2.14.1 CPU fp32 vs onnxruntime 1.31.1 CPU
# on BOTH exporters' models, worst of the two; module seed 0, input seeds 0 and 1, traced and
# other batch). `raw_activation_max` is not measured there and repeats `activation_max`.
# A case not measured yet gets atol 1e-3 and a bound that only catches overflow. 1e-3: large
# untrained nets without residual damping are ill-conditioned in fp32 (regnet_x_32gf: both
# exporters' models differ from torch by the same 1.3e-4 at output scale 1.6), while a wrong
# op errs by 1e-2 of the output scale and more.
UNMEASURED_ATOL = 1e-3
UNMEASURED_ACTIVATION_BOUND = 1e4
EXTENDED_SOURCE = (
    "tools/gen_coverage.py: torch 2.14.1 CPU fp32 vs onnxruntime 1.31.1 CPU, worst of roundtrip and "
    "torch.onnx (dynamo) exports; module seed 0, input seeds 0-1, traced and other batch"
)

# fmt: off
_EXTENDED_ROWS: tuple[tuple[str, int, float, float, float, float], ...] = (
    # name                             params  act max  raw act max  ORT err  out scale
    ('convnext_base'                   ,   88591464,     7.08,     7.08,  2.68e-06,     2.23),
    ('convnext_large'                  ,  197767336,     7.63,     7.63,   3.9e-06,     2.73),
    ('convnext_small'                  ,   50223688,     6.44,     6.44,  2.26e-06,     1.87),
    ('convnext_tiny'                   ,   28589128,     6.76,     6.76,  2.21e-06,     2.01),
    ('deeplabv3_mobilenet_v3_large'    ,   11025477,     73.7,     73.7,  7.72e-05,     28.4),
    ('deeplabv3_resnet101'             ,   58630997,     71.4,     71.4,  0.000762,     2.88),
    ('deeplabv3_resnet50'              ,   39638869,     27.1,     27.1,  0.000171,     1.55),
    ('efficientnet_b0'                 ,    5288548,     49.6,     49.6,  5.82e-05,     10.6),
    ('efficientnet_b1'                 ,    7794184,     18.1,     18.1,  1.41e-05,      2.4),
    ('efficientnet_b2'                 ,    9109994,     11.1,     11.1,  5.13e-06,    0.679),
    ('efficientnet_b3'                 ,   12233232,     25.6,     25.6,  4.11e-05,     3.02),
    ('efficientnet_b4'                 ,   19341616,     11.9,     11.9,  2.05e-05,     1.54),
    ('efficientnet_b5'                 ,   30389784,     18.1,     18.1,  4.09e-05,     2.61),
    ('efficientnet_b6'                 ,   43040704,     10.4,     10.4,   1.9e-05,    0.373),
    ('efficientnet_b7'                 ,   66347960,     11.6,     11.6,  9.95e-06,    0.392),
    ('efficientnet_v2_l'               ,  118515272,     20.7,     20.7,  5.07e-06,    0.327),
    ('efficientnet_v2_m'               ,   54139356,     20.8,     20.8,  2.93e-05,     1.78),
    ('efficientnet_v2_s'               ,   21458488,      144,      144,  0.000163,     13.5),
    ('fcn_resnet101'                   ,   51949141,     71.4,     71.4,  0.000504,      2.1),
    ('fcn_resnet50'                    ,   32957013,     27.1,     27.1,  0.000103,      1.5),
    ('googlenet'                       ,    6624904,     5.32,     5.32,  1.82e-05,    0.708),
    ('lraspp_mobilenet_v3_large'       ,    3221538,     42.3,     42.3,  4.01e-05,     6.89),
    ('maxvit_t'                        ,   30919624,     7.43,     7.43,  1.01e-06,    0.663),
    ('mc3_18'                          ,   11695440,     8.83,     8.83,  6.71e-07,    0.538),
    ('mnasnet0_5'                      ,    2218512,     12.3,     12.3,   2.4e-05,     2.81),
    ('mnasnet0_75'                     ,    3170208,     11.5,     11.5,   2.5e-05,     2.24),
    ('mnasnet1_0'                      ,    4383312,     14.1,     14.1,  2.27e-05,     3.11),
    ('mnasnet1_3'                      ,    6282256,     12.6,     12.6,  2.75e-05,     2.92),
    ('mobilenet_v2'                    ,    3504872,     13.2,     13.2,  9.12e-06,    0.972),
    ('mobilenet_v3_large'              ,    5483032,     58.3,     58.3,  8.34e-06,     1.65),
    ('mobilenet_v3_small'              ,    2542856,     19.6,     19.6,  6.56e-07,    0.307),
    ('mvit_v1_b'                       ,   36610672,     7.44,     7.44,  1.25e-06,     1.72),
    ('mvit_v2_s'                       ,   34537744,     7.04,     7.04,  1.46e-06,     1.84),
    ('r2plus1d_18'                     ,   31505325,     9.73,     9.73,  1.53e-05,     0.73),
    ('r3d_18'                          ,   33371472,     8.95,     8.95,  2.06e-06,    0.751),
    ('raft_large'                      ,    5257536,     37.6,     37.6,  1.14e-05,     5.56),
    ('raft_small'                      ,     990162,     43.4,     43.4,  3.81e-05,     18.1),
    ('regnet_x_16gf'                   ,   54278536,     32.8,     32.8,  8.37e-05,     1.75),
    ('regnet_x_1_6gf'                  ,    9190136,     17.4,     17.4,  3.12e-05,     1.09),
    ('regnet_x_32gf'                   ,  107811560,     27.8,     27.8,  8.44e-05,     1.59),
    ('regnet_x_3_2gf'                  ,   15296552,     32.2,     32.2,  8.35e-05,     2.07),
    ('regnet_x_400mf'                  ,    5495976,     22.1,     22.1,  4.47e-05,     2.44),
    ('regnet_x_800mf'                  ,    7259656,     14.2,     14.2,  2.28e-05,     1.41),
    ('regnet_x_8gf'                    ,   39572648,     24.7,     24.7,  4.92e-05,      1.2),
    ('regnet_y_128gf'                  ,  644812894,     34.4,     34.4,  0.000258,     3.64),
    ('regnet_y_16gf'                   ,   83590140,     23.8,     23.8,   4.7e-05,     1.82),
    ('regnet_y_1_6gf'                  ,   11202430,     83.7,     83.7,  0.000284,     11.9),
    ('regnet_y_32gf'                   ,  145046770,     29.8,     29.8,  7.88e-05,     2.68),
    ('regnet_y_3_2gf'                  ,   19436338,     30.3,     30.3,  4.65e-05,     1.56),
    ('regnet_y_400mf'                  ,    4344144,     12.7,     12.7,  2.01e-05,     1.37),
    ('regnet_y_800mf'                  ,    6432512,     14.4,     14.4,  1.35e-05,     1.38),
    ('regnet_y_8gf'                    ,   39381472,     22.3,     22.3,  4.07e-05,     1.57),
    ('resnext101_64x4d'                ,   83455272,     40.9,     40.9,  0.000453,     5.03),
    ('s3d'                             ,    8320048,     7.64,     7.64,  3.44e-05,    0.908),
    ('shufflenet_v2_x0_5'              ,    1366792,     6.48,     6.48,  1.13e-05,     1.08),
    ('shufflenet_v2_x1_0'              ,    2278604,     7.67,     7.67,  1.22e-05,     1.33),
    ('shufflenet_v2_x1_5'              ,    3503624,     8.94,     8.94,  1.44e-05,     1.17),
    ('shufflenet_v2_x2_0'              ,    7393996,     8.51,     8.51,  1.44e-05,      1.1),
    ('squeezenet1_0'                   ,    1248424,     7.44,     7.44,  2.98e-07,    0.602),
    ('squeezenet1_1'                   ,    1235496,     9.06,     9.06,  1.79e-07,    0.552),
    ('swin3d_b'                        ,   88048984,     4.73,     4.73,  1.01e-06,     1.59),
    ('swin3d_s'                        ,   49816678,     4.54,     4.54,  9.69e-07,     1.29),
    ('swin3d_t'                        ,   28158070,     4.34,     4.34,  9.54e-07,     1.74),
    ('swin_b'                          ,   87768224,     4.63,     4.63,  1.27e-06,     1.35),
    ('swin_s'                          ,   49606258,     4.17,     4.17,  1.07e-06,      1.4),
    ('swin_t'                          ,   28288354,     4.47,     4.47,   1.1e-06,     1.23),
    ('swin_v2_b'                       ,   87930848,     20.7,     20.7,   5.6e-06,     1.98),
    ('swin_v2_s'                       ,   49737442,     17.9,     17.9,  6.02e-06,     2.23),
    ('swin_v2_t'                       ,   28351570,     9.88,     9.88,  4.99e-06,     1.63),
    ('vit_b_16'                        ,   86429416,     4.61,     4.61,  3.16e-06,     2.12),
    ('vit_b_32'                        ,   88189672,     4.68,     4.68,  2.53e-06,     2.22),
    ('vit_h_14'                        ,  631738600,     5.07,     5.07,   3.7e-06,     2.63),
    ('vit_l_16'                        ,  304142312,     4.91,     4.91,   3.4e-06,     2.39),
    ('vit_l_32'                        ,  306489320,     4.64,     4.64,   3.1e-06,     2.27),
)
# fmt: on

EXTENDED_MEASUREMENTS: dict[str, Measured] = {name: Measured(*values) for name, *values in _EXTENDED_ROWS}
