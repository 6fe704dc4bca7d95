"""RoPE frequencies theta_i = base**(-2i/r), i = 0..r/2-1, computed once in high precision.

Source: Su et al., RoFormer (arXiv 2104.09864) section 3.3, theta_i = 10000**(-2i/d) (0-based;
eq. 15 writes the same set 1-based). ``rotary_dim`` r plays the role of d (GPT-NeoX / GPT-J
partial rotary).

The values come from the frequency table ``phase.ladder(rotary_dim, base)`` (mpmath at 576 bits
from the float64 ``base`` taken exactly, cached per (rotary_dim, base)): ``inv_freq`` is correctly
rounded, ``inv_freq_dd`` is the double-double (hi, lo) with hi + lo equal to theta_i to about
2**-106 relative.

``frequencies`` dispatches by ``rope_type`` (HF ``rope_parameters`` naming) to the scaling types
in scaling/, one module each; ``scaled_table`` gives the same frequencies as a phase table, so
scaled cos/sin and apply share the exact reduction and golden mode of default RoPE.
"""

import mpmath
import numpy as np

from . import scaling as scaling_types
from .validate import check_base, check_rotary_dim
from .phase import ladder, table_from_mp


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


# rope_type names: "default" and the scaling types, one module each in scaling/.
ROPE_TYPES = ("default",) + scaling_types.TYPES


def _seq_len(seq_len):
    if seq_len is None:
        return None
    if isinstance(seq_len, bool) or not isinstance(seq_len, (int, np.integer)) or seq_len < 0:
        raise ValueError(f"seq_len: must be a non-negative integer or None, got {seq_len!r}")
    return int(seq_len)


def scaled_table(rotary_dim, base=10000.0, scaling=None, seq_len=None):
    """(FrequencyTable of theta'_i, attention factor as a callable(prec) -> mpf) for a scaling
    in HF form; the plain ladder and 1 when scaling is None or "default"."""
    r = check_rotary_dim(rotary_dim)
    b = check_base(base)
    rope_type, params = scaling_types.resolve(scaling)
    n = _seq_len(seq_len)
    if rope_type == "default":
        return ladder(r, b), lambda prec: mpmath.mpf(1)
    # Parameters a formula refuses (list lengths, llama3's band order) raise from values() when the
    # table is first built, and a refused table is never cached.
    key = ("rope.scaled", r, b, rope_type, tuple(sorted(params.items())), n)

    def values(prec):
        return scaling_types.exact(rope_type, params, r, b, n)[0]

    cache = {}

    def factor(prec, m=None, i=None):  # the same for every position and pair
        if prec not in cache:
            with mpmath.workprec(prec):
                cache[prec] = scaling_types.exact(rope_type, params, r, b, n)[1]
        return cache[prec]

    return table_from_mp(key, values), factor


def frequencies(rotary_dim, base=10000.0, scaling=None, seq_len=None):
    """(inv_freq float64[r/2], attention_factor float) for a scaling spec in HF form, each
    correctly rounded from its exact value (computed in mpmath from the float64 parameters).

    scaling: None (the default ladder) or a dict with "rope_type" (or legacy "type") naming one
    of ``ROPE_TYPES`` plus that type's parameters (reference/numerics/scaling/). seq_len: the current
    sequence length, used only by types that depend on it (dynamic, length, longrope).
    """
    table, factor = scaled_table(rotary_dim, base, scaling, seq_len)
    with mpmath.workprec(200):
        f = float(factor(200))
    return table.hi.copy(), f
