"""RoPE frequencies theta_i = base**(-2i/r), i = 0..r/2-1, computed once in high precision.

Source: Su et al., RoFormer (arXiv 2104.09864) section 3.3, theta_i = 10000**(-2i/d) (0-based;
eq. 15 writes the same set 1-based). ``rotary_dim`` r plays the role of d (GPT-NeoX / GPT-J
partial rotary).

The values come from the frequency table ``phase.ladder(rotary_dim, base)`` (mpmath at 576 bits
from the float64 ``base`` taken exactly, cached per (rotary_dim, base)): ``inv_freq`` is correctly
rounded, ``inv_freq_dd`` is the double-double (hi, lo) with hi + lo equal to theta_i to about
2**-106 relative.

``frequencies`` dispatches by ``rope_type`` through ``ROPE_TYPES`` (HF ``rope_parameters``
naming); only "default" exists until the scaling issue adds the others.
"""

import numpy as np

from ._validate import check_base, check_rotary_dim
from .phase import ladder


def inv_freq(rotary_dim, base=10000.0):
    """theta_i = base**(-2i/rotary_dim) for i = 0..rotary_dim/2-1, correctly rounded float64.

    base in [1, 2**64]. Returns a new float64 array of shape [rotary_dim // 2].
    """
    return ladder(check_rotary_dim(rotary_dim), check_base(base)).hi.copy()


def inv_freq_dd(rotary_dim, base=10000.0):
    """theta_i as a double-double: (hi, lo), hi + lo = theta_i to about 2**-106 relative.

    hi equals ``inv_freq(rotary_dim, base)``. Each array has shape [rotary_dim // 2].
    """
    table = ladder(check_rotary_dim(rotary_dim), check_base(base))
    return table.hi.copy(), table.lo.copy()


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
