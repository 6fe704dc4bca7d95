"""RoPE frequencies theta_i = base**(-2i/r), i = 0..r/2-1, computed once in high precision.

Source: Su et al., RoFormer (arXiv 2104.09864) section 3.3, theta_i = 10000**(-2i/d) (0-based;
eq. 15 writes the same set 1-based). ``rotary_dim`` r plays the role of d (GPT-NeoX / GPT-J
partial rotary).

The values are evaluated with mpmath at 256 bits from the float64 ``base`` taken exactly, then
rounded: ``inv_freq`` is correctly rounded, ``inv_freq_dd`` is the double-double (hi, lo) with
hi + lo equal to theta_i to about 2**-106 relative. Both are cached per (rotary_dim, base).

``frequencies`` dispatches by ``rope_type`` through ``ROPE_TYPES`` (HF ``rope_parameters``
naming); only "default" exists until the scaling issue adds the others.
"""

import functools

import mpmath
import numpy as np

from ._validate import check_base, check_rotary_dim

_PREC_BITS = 256
# theta_i / (2 pi) is split into this many chunks of _CHUNK_BITS significant bits each, for the
# NumPy twin's exact reduction in turns (see numpy_twin.py).
_TURN_CHUNKS = 7
_CHUNK_BITS = 26


def _theta_mp(rotary_dim, base):
    """theta_i as mpf values at the current mpmath precision."""
    b = mpmath.mpf(base)
    r = mpmath.mpf(rotary_dim)
    return [b ** (-(2 * i) / r) for i in range(rotary_dim // 2)]


@functools.lru_cache(maxsize=256)
def _theta_tables(rotary_dim, base):
    with mpmath.workprec(_PREC_BITS):
        thetas = _theta_mp(rotary_dim, base)
        hi = np.array([float(t) for t in thetas], dtype=np.float64)
        lo = np.array([float(t - mpmath.mpf(h)) for t, h in zip(thetas, hi)], dtype=np.float64)
        two_pi = 2 * mpmath.pi
        chunks = np.empty((_TURN_CHUNKS, len(thetas)), dtype=np.float64)
        for i, t in enumerate(thetas):
            rest = t / two_pi
            for k in range(_TURN_CHUNKS):
                # Round the remainder to _CHUNK_BITS significant bits: exact in float64.
                with mpmath.workprec(_CHUNK_BITS):
                    c = +rest
                chunks[k, i] = float(c)
                rest = rest - c
    for arr in (hi, lo, chunks):
        arr.setflags(write=False)
    return hi, lo, chunks


def inv_freq(rotary_dim, base=10000.0):
    """theta_i = base**(-2i/rotary_dim) for i = 0..rotary_dim/2-1, correctly rounded float64.

    Returns a new float64 array of shape [rotary_dim // 2].
    """
    r = check_rotary_dim(rotary_dim)
    return _theta_tables(r, check_base(base))[0].copy()


def inv_freq_dd(rotary_dim, base=10000.0):
    """theta_i as a double-double: (hi, lo), hi + lo = theta_i to about 2**-106 relative.

    hi equals ``inv_freq(rotary_dim, base)``. Each array has shape [rotary_dim // 2].
    """
    r = check_rotary_dim(rotary_dim)
    hi, lo, _ = _theta_tables(r, check_base(base))
    return hi.copy(), lo.copy()


def inv_freq_turn_chunks(rotary_dim, base=10000.0):
    """theta_i / (2 pi) split into chunks of at most 26 significant bits: float64[7, r/2].

    The chunks sum to theta_i / (2 pi) to about 2**-180 relative; any product of a chunk with an
    integer of at most 27 bits is exact in float64. Read-only array (cached).
    """
    r = check_rotary_dim(rotary_dim)
    return _theta_tables(r, check_base(base))[2]


def default_frequencies(rotary_dim, base, params, seq_len):
    """The unscaled ladder: (inv_freq, attention_factor = 1.0)."""
    return inv_freq(rotary_dim, base), 1.0


# rope_type -> fn(rotary_dim, base, params: dict, seq_len) -> (inv_freq, attention_factor)
ROPE_TYPES = {"default": default_frequencies}


def frequencies(rotary_dim, base=10000.0, scaling=None, seq_len=None):
    """(inv_freq float64[r/2], attention_factor float) for a scaling spec in HF form.

    scaling: None (the default ladder) or a dict with "rope_type" (or legacy "type") naming an
    entry of ``ROPE_TYPES``, plus that type's parameters. seq_len: the current sequence length,
    used only by types that depend on it.
    """
    r = check_rotary_dim(rotary_dim)
    b = check_base(base)
    if scaling is None:
        params, rope_type = {}, "default"
    elif isinstance(scaling, dict):
        params = dict(scaling)
        rope_type = params.get("rope_type", params.get("type", "default"))
    else:
        raise ValueError(f"scaling: must be None or a dict with 'rope_type', got {scaling!r}")
    if rope_type not in ROPE_TYPES:
        raise ValueError(
            f"scaling: unknown rope_type {rope_type!r}; known: {', '.join(sorted(ROPE_TYPES))}"
        )
    if seq_len is not None:
        if isinstance(seq_len, bool) or not isinstance(seq_len, (int, np.integer)) or seq_len < 0:
            raise ValueError(f"seq_len: must be a non-negative integer or None, got {seq_len!r}")
        seq_len = int(seq_len)
    inv, factor = ROPE_TYPES[rope_type](r, b, params, seq_len)
    return np.asarray(inv, dtype=np.float64), float(factor)
