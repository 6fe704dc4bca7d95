"""Llama 3.1 scaling: high frequencies kept, low frequencies divided by the factor, a smooth band.

With lambda_i = 2 pi / theta_i, L = ``original_max_position_embeddings``:

    lambda_i < L / high_freq_factor:   theta'_i = theta_i
    lambda_i > L / low_freq_factor:    theta'_i = theta_i / factor
    otherwise (inclusive band):        smooth = (L / lambda_i - low) / (high - low),
                                       theta'_i = (1 - smooth) theta_i / factor + smooth theta_i

Source: meta-llama/llama-models ``apply_scaling`` (models/llama3/model.py), identical to HF
``_compute_llama3_parameters``; Llama 3.1 uses factor 8, low 1, high 4, L = 8192 at base 5e5.
Continuous at both band edges. Attention factor 1.
"""

import mpmath

from ._params import at_least_one, length, positive

REQUIRED = {"factor": at_least_one, "low_freq_factor": positive, "high_freq_factor": positive,
            "original_max_position_embeddings": length}
OPTIONAL = {}
SOURCE = "https://github.com/meta-llama/llama-models/blob/main/models/llama3/model.py"


def frequencies(theta, r, base, params, seq_len):
    s = mpmath.mpf(params["factor"])
    lo, hi = mpmath.mpf(params["low_freq_factor"]), mpmath.mpf(params["high_freq_factor"])
    if hi <= lo:
        raise ValueError(f"scaling: high_freq_factor ({params['high_freq_factor']}) must exceed "
                         f"low_freq_factor ({params['low_freq_factor']})")
    big_l = mpmath.mpf(params["original_max_position_embeddings"])
    out = []
    for t in theta:
        wavelen = 2 * mpmath.pi / t
        if wavelen < big_l / hi:
            out.append(t)
        elif wavelen > big_l / lo:
            out.append(t / s)
        else:
            smooth = (big_l / wavelen - lo) / (hi - lo)
            out.append((1 - smooth) * t / s + smooth * t)
    return out, mpmath.mpf(1)
