"""Bug: values past e4m3's largest finite value (448) become NaN: the cast is trusted to saturate.

torch 2.11's eager cast to float8_e4m3fn does not saturate (measured on the CPU and on CUDA: values
from 465 up become NaN, while the same code under torch.compile on CUDA saturates, as Triton's
conversion does), and neither do ml_dtypes' and JAX's casts: kernels clamp to +-448 first. This
example re-enacts code that skips the clamp on such a cast: the cast of torch 2.11's eager mode is
emulated (torch 2.13 saturates by itself). Expected diagnosis:
``fp8-not-saturated``.
"""

from pathlib import Path

import torch

from conformance.loader import load_target

CODE = "fp8-not-saturated"
PROTOCOL = "rope.apply_qk_fp8"

rotate = load_target(f"{Path(__file__).resolve().parents[1] / 'fp8_quantize.py'}:rotate")


def _unsaturated_cast(v):
    """The non-saturating cast (torch 2.11 eager, ml_dtypes, JAX): from 465 up, NaN."""
    return torch.where(v.abs() > 464.0, torch.nan, v).to(torch.float8_e4m3fn)


def _quantize(x, scale):
    return _unsaturated_cast(x / scale)  # BUG: no clamp to [-448, 448] before a cast that does not saturate


def apply_qk_fp8(q, k, positions, spec):
    return _quantize(rotate(q, positions, spec), spec.q_scale), _quantize(rotate(k, positions, spec), spec.k_scale)
