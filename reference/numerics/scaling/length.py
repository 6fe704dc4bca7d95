"""The length rule: theta'_i = theta_i * s(L), s(L) = min(1, L0 / L).

Source: seed document 003 (dynamic RoPE as described for Qwen3): s(L) = 1 for L <= L0 (the
training length), decreasing for L > L0, "such as s(L) = L0 / L or a smoother piecewise
function"; the document states no other form, so only L0 / L is implemented. L is the current
sequence length (seq_len; None means L0), L0 is ``original_max_position_embeddings``.
Attention factor 1.
"""

import mpmath

from ._params import length

REQUIRED = {"original_max_position_embeddings": length}
OPTIONAL = {}
SOURCE = "seed document 003 (Qwen3 dynamic RoPE)"


def shrink(seq_len, l0):
    """s(L) = min(1, L0 / L) as an mpf."""
    big_l = int(seq_len or l0)
    return mpmath.mpf(1) if big_l <= l0 else mpmath.mpf(l0) / big_l


def frequencies(theta, r, base, params, seq_len):
    s = shrink(seq_len, params["original_max_position_embeddings"])
    return [t * s for t in theta], mpmath.mpf(1)
