"""float8 e4m3 (the ``e4m3fn`` variant: no infinities, largest finite 448) on float64 arrays, and RoPE
quantised to it with a per-tensor scale.

e4m3fn (OCP 8-bit floating point, E4M3; torch.float8_e4m3fn): 1 sign bit, 4 exponent bits (bias 7),
3 mantissa bits. Normal numbers 2**-6 <= |v| <= 448 have spacing 2**(e - 3) for 2**e <= |v| < 2**(e+1);
subnormals below 2**-6 have spacing 2**-9. There is no infinity; the one NaN pattern per sign
replaces e4m3's largest binade's top value, hence 448 = 1.75 * 2**8.

Quantised RoPE (FlashInfer's RoPE + fp8 quantize, vLLM's fp8 KV cache with a per-tensor scale):

    stored = sat(round_e4m3(rope(x) / scale))

with ``sat`` clamping to [-448, 448]. Saturating is what serving kernels do (a clamp before the
conversion, or a saturating conversion instruction). Casts differ (measured): torch 2.13's cast on
the CPU saturates (460, 1000 and inf become 448); torch 2.11's eager cast, on the CPU and on CUDA
(H100), and its torch.compile on the CPU, turn values from 465 up into NaN, as ml_dtypes 0.6 and
JAX 0.11 do, while Triton's conversion and torch.compile on CUDA saturate (pytorch/ao PR #4359
records torch's change). Code that relies on the cast instead of clamping gives NaN there
(conformance code ``fp8-not-saturated``).

Functions here never round through float32: every step is exact in float64 (v / spacing is a
scaling by a power of two) up to the final floor, ceil or round-half-even of an exact quotient.
"""

from __future__ import annotations

import numpy as np

E4M3_MAX = 448.0
E4M3_MIN_NORMAL = 2.0**-6
E4M3_SUBNORMAL = 2.0**-9  # spacing below 2**-6
MANTISSA_BITS = 3


def spacing(v) -> np.ndarray:
    """The e4m3 spacing at v (float64 array): 2**(e - 3) for 2**e <= |v| < 2**(e+1), 2**-9 below
    2**-6. At a binade's lower edge the smaller spacing is used; the grid of the binade below
    contains the one above, so floors and ceilings on it are e4m3 values either way."""
    a = np.abs(np.asarray(v, dtype=np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        _, e = np.frexp(np.where(a >= E4M3_MIN_NORMAL, a, 1.0))  # a = f * 2**e, f in [0.5, 1)
    return np.where(a >= E4M3_MIN_NORMAL, np.ldexp(1.0, e - 1 - MANTISSA_BITS), E4M3_SUBNORMAL)


def _on_grid(v, how) -> np.ndarray:
    v = np.asarray(v, dtype=np.float64)
    step = spacing(np.clip(v, -2 * E4M3_MAX, 2 * E4M3_MAX))
    with np.errstate(invalid="ignore"):
        out = how(np.clip(v, -2 * E4M3_MAX, 2 * E4M3_MAX) / step) * step
    return np.where(np.isnan(v), np.nan, np.clip(out, -E4M3_MAX, E4M3_MAX))


def round_down(v) -> np.ndarray:
    """The largest e4m3 value <= v, saturated to [-448, 448] (NaN stays NaN)."""
    return _on_grid(v, np.floor)


def round_up(v) -> np.ndarray:
    """The smallest e4m3 value >= v, saturated to [-448, 448] (NaN stays NaN)."""
    return _on_grid(v, np.ceil)


def round_nearest(v) -> np.ndarray:
    """v rounded to the nearest e4m3 value, ties to even, saturated to [-448, 448]: torch 2.13's
    ``v.to(torch.float8_e4m3fn)`` for a float64 v (NaN stays NaN)."""
    return _on_grid(v, np.rint)


def quantize(rotated, scale: float) -> np.ndarray:
    """sat(round_e4m3(rotated / scale)): the stored float8 values of an exact RoPE output
    ``rotated`` (float64, any shape) with the per-tensor ``scale`` (> 0)."""
    if not scale > 0:
        raise ValueError(f"scale: must be a positive number, got {scale!r}")
    return round_nearest(np.asarray(rotated, dtype=np.float64) / float(scale))
