"""Argument checks shared by the public RoPE functions.

Every failure is a ValueError whose message starts with the argument's name and gives a
one-line reason, so a CLI can print it as is.
"""

import math
import numbers

import numpy as np

LAYOUTS = ("half", "interleaved")
BACKENDS = ("cpu", "cuda", "numpy")
MODES = ("fast", "golden")

# base**(-2i/r) must stay inside the frequency range phase.py supports, [2**-64, 2**20]: any base
# in [1, 2**64] gives theta_i in (1/base, 1]. Below 1 the ladder would grow (and the angle's
# integer part outrun every reduction); above 2**64 the smallest theta falls below 2**-64.
MIN_BASE = 1.0
MAX_BASE = 2.0**64

# float64 holds every integer up to 2**53; beyond it m * theta is not even defined exactly.
MAX_ABS_POSITION = 2**53


def check_base(base):
    """base: a finite real number in [1, 2**64] (returned as float)."""
    if isinstance(base, (bool, np.bool_)) or not isinstance(base, numbers.Real):
        raise ValueError(f"base: must be a real number, got {base!r}")
    value = float(base)
    if not math.isfinite(value):
        raise ValueError(f"base: must be finite, got {base!r}")
    if not MIN_BASE <= value <= MAX_BASE:
        raise ValueError(f"base: must be in [1, 2**64] (theta = base**(-2i/r)), got {base!r}")
    return value


def check_rotary_dim(rotary_dim, head_dim=None):
    """rotary_dim: a positive even integer, at most head_dim when that is known."""
    if isinstance(rotary_dim, (bool, np.bool_)) or not isinstance(rotary_dim, numbers.Integral):
        raise ValueError(f"rotary_dim: must be an integer, got {rotary_dim!r}")
    r = int(rotary_dim)
    if r <= 0:
        raise ValueError(f"rotary_dim: must be > 0, got {r}")
    if r % 2:
        raise ValueError(f"rotary_dim: must be even (it rotates pairs), got {r}")
    if head_dim is not None and r > head_dim:
        raise ValueError(f"rotary_dim: {r} exceeds head_dim {head_dim}")
    return r


def check_layout(layout):
    if not isinstance(layout, str) or layout not in LAYOUTS:
        raise ValueError(f"layout: must be one of {', '.join(LAYOUTS)}; got {layout!r}")
    return layout


def check_mode(mode):
    if not isinstance(mode, str) or mode not in MODES:
        raise ValueError(f"mode: must be one of {', '.join(MODES)}; got {mode!r}")
    return mode


def check_backend(backend):
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ValueError(f"backend: must be one of {', '.join(BACKENDS)}; got {backend!r}")
    return backend


def check_x(x):
    """x: a 4-D array [batch, seq, heads, head_dim] of a real dtype; returned as float64 C-order.

    The result is always a fresh array (never a view of the caller's input), so callers may
    write into it.
    """
    arr = np.asarray(x)
    if arr.dtype.kind not in "fiu":
        raise ValueError(f"x: must have a real numeric dtype, got {arr.dtype}")
    if arr.ndim != 4:
        raise ValueError(f"x: must be 4-D [batch, seq, heads, head_dim], got shape {arr.shape}")
    return np.array(arr, dtype=np.float64, order="C", copy=True)


def as_x(x):
    """As check_x, but without a copy when x is already float64 C-contiguous: the result may be
    the caller's own array, so callers must not write into it."""
    arr = np.asarray(x)
    if arr.dtype.kind not in "fiu":
        raise ValueError(f"x: must have a real numeric dtype, got {arr.dtype}")
    if arr.ndim != 4:
        raise ValueError(f"x: must be 4-D [batch, seq, heads, head_dim], got shape {arr.shape}")
    return np.ascontiguousarray(arr, dtype=np.float64)


def check_positions(positions, shape=None):
    """positions: an integer array (not bool, not float); shape must equal ``shape`` if given.

    Returns int64 C-contiguous. Values must satisfy |m| <= 2**53.
    """
    arr = np.asarray(positions)
    if arr.dtype.kind not in "iu":
        raise ValueError(f"positions: must be an integer array, got dtype {arr.dtype}")
    if shape is not None and arr.shape != tuple(shape):
        raise ValueError(
            f"positions: shape {arr.shape} does not match x's [batch, seq] = {tuple(shape)}"
        )
    # Python ints compare without overflow, whatever the integer dtype
    if arr.size and (int(arr.max()) > MAX_ABS_POSITION or int(arr.min()) < -MAX_ABS_POSITION):
        raise ValueError("positions: |position| above 2**53 is not supported")
    return np.ascontiguousarray(arr, dtype=np.int64)


def resolve_rotary_dim(rotary_dim, head_dim):
    return check_rotary_dim(head_dim if rotary_dim is None else rotary_dim, head_dim)
