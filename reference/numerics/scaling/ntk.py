"""Static NTK-aware scaling: the base raised to b' = b * factor**(r / (r - 2)).

Source: YaRN paper (Peng et al., arXiv 2309.00071) Definition 1, eqs. 14-16 and appendix A.1:
the lowest frequency then matches position interpolation by ``factor``. HF had it as "ntk" in
early versions (``base * factor ** (dim / (dim - 2))``). Attention factor 1. Needs r >= 4.
"""

import mpmath

from ._params import at_least_one

REQUIRED = {"factor": at_least_one}
OPTIONAL = {}
SOURCE = "https://arxiv.org/abs/2309.00071"


def ntk_ratio(scale, r):
    """theta'_i / theta_i for the NTK base b * scale**(r/(r-2)): scale**(-2i/(r-2)) per pair."""
    if r < 4:
        raise ValueError(f"scaling: NTK-aware scaling needs rotary_dim >= 4, got {r}")
    return [scale ** (-mpmath.mpf(2 * i) / (r - 2)) for i in range(r // 2)]


def frequencies(theta, r, base, params, seq_len):
    ratios = ntk_ratio(mpmath.mpf(params["factor"]), r)
    return [t * q for t, q in zip(theta, ratios)], mpmath.mpf(1)
