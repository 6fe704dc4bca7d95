"""Linear position interpolation: theta'_i = theta_i / factor (positions m read as m / factor).

Source: Chen et al., "Extending Context Window of Large Language Models via Positional
Interpolation" (arXiv 2306.15595), f'(x, m) = f(x, m L / L'); HF
``_compute_linear_scaling_rope_parameters`` (``inv_freq /= factor``). Attention factor 1.
"""

import mpmath

from ._params import at_least_one

REQUIRED = {"factor": at_least_one}
OPTIONAL = {}
SOURCE = "https://arxiv.org/abs/2306.15595"


def frequencies(theta, r, base, params, seq_len):
    s = mpmath.mpf(params["factor"])
    return [t / s for t in theta], mpmath.mpf(1)
