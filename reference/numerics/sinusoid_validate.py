"""Argument checks of the sinusoidal tables (sinusoid.py): each failure is a one-line ValueError whose
message starts with the argument's name."""

from __future__ import annotations

import math
import numbers

import numpy as np

from .validate import BACKENDS, MAX_ABS_POSITION, check_backend, check_mode  # noqa: F401

LAYOUTS = ("interleaved", "concatenated")
EXPONENTS = ("2i/d", "2i/(d-2)")
DIMS = (1, 2)
# Every frequency base**(-e) with e in [0, 2] (odd d_model with the 2i/(d-2) rule reaches e = 2)
# must lie in [2**-64, 2**20], the range of phase.py.
MIN_BASE, MAX_BASE = 1.0, 2.0**32


def _integer(value, name):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name}: must be an integer, got {value!r}")
    return int(value)


def check_base(base) -> float:
    if isinstance(base, (bool, np.bool_)) or not isinstance(base, numbers.Real):
        raise ValueError(f"base: must be a real number, got {base!r}")
    value = float(base)
    if not (math.isfinite(value) and MIN_BASE < value <= MAX_BASE):
        raise ValueError(f"base: must be in (1, 2**32] (frequencies base**(-2i/d)), got {base!r}")
    return value


def check_choice(value, name, choices):
    if not isinstance(value, (str, int)) or isinstance(value, bool) or value not in choices:
        raise ValueError(f"{name}: must be one of {', '.join(map(str, choices))}; got {value!r}")
    return value


def check_d_model(d_model, exponent, dims) -> int:
    """d_model >= 2; the 2i/(d-2) rule divides by d/2 - 1 (so d_model >= 4); 2-D tables split
    d_model into two 1-D tables of d_model / 2 with [sin | cos] halves (so a multiple of 4)."""
    d = _integer(d_model, "d_model")
    part = d // 2 if dims == 2 else d
    if d < 2:
        raise ValueError(f"d_model: must be >= 2, got {d}")
    if dims == 2 and d % 4:
        raise ValueError(f"d_model: a 2-D table needs a multiple of 4 (two [sin | cos] halves), got {d}")
    if exponent == "2i/(d-2)" and part // 2 < 2:
        raise ValueError(f"d_model: the 2i/(d-2) rule divides by d/2 - 1, so it needs d >= 4, got {part}")
    return d


def check_positions(positions, dims) -> np.ndarray:
    """Integer positions, [...] for 1-D tables and [..., 2] (the two coordinates) for 2-D ones."""
    arr = np.asarray(positions)
    if arr.dtype.kind not in "iu":
        raise ValueError(f"positions: must be integers, got dtype {arr.dtype}")
    if dims == 2 and (arr.ndim == 0 or arr.shape[-1] != 2):
        raise ValueError(f"positions: a 2-D table needs coordinates [..., 2], got shape {list(arr.shape)}")
    if arr.size and int(np.max(np.abs(arr.astype(np.float64)))) > MAX_ABS_POSITION:
        raise ValueError("positions: |position| must be at most 2**53")
    return arr.astype(np.int64)
