"""LongRoPE (Phi-3): a rescale factor per pair, short or long by the sequence length.

theta'_i = theta_i / lambda_i with lambda = ``long_factor`` when seq_len exceeds L =
``original_max_position_embeddings``, else ``short_factor`` (each rotary_dim // 2 entries;
seq_len None means short). Attention factor: ``attention_factor`` when given, else
sqrt(1 + ln s / ln L) for s > 1 (1 otherwise), s = ``factor``, or ``max_position_embeddings`` / L.

Source: HF ``_compute_longrope_parameters`` and the Phi-3 modeling code (the runtime choice by
seq_len as in HF's ``longrope_frequency_update``); paper: Ding et al., arXiv 2402.13753.
"""

import mpmath

from ._params import at_least_one, factors, length, positive

REQUIRED = {"short_factor": factors, "long_factor": factors, "original_max_position_embeddings": length}
OPTIONAL = {"factor": at_least_one, "attention_factor": positive, "max_position_embeddings": length}
SOURCE = "https://arxiv.org/abs/2402.13753"


def frequencies(theta, r, base, params, seq_len):
    big_l = params["original_max_position_embeddings"]
    ext = params["long_factor"] if int(seq_len or 0) > big_l else params["short_factor"]
    out = [t / mpmath.mpf(e) for t, e in zip(theta, ext)]
    if "attention_factor" in params:
        return out, mpmath.mpf(params["attention_factor"])
    s = mpmath.mpf(params["factor"]) if "factor" in params else (
        mpmath.mpf(params.get("max_position_embeddings", big_l)) / big_l)
    if s <= 1:
        return out, mpmath.mpf(1)
    if big_l == 1:  # ln L = 0: the derived factor does not exist (HF divides by zero too)
        raise ValueError("scaling: longrope's attention factor sqrt(1 + ln s / ln L) needs "
                         "original_max_position_embeddings >= 2 (or an explicit attention_factor), got 1")
    return out, mpmath.sqrt(1 + mpmath.log(s) / mpmath.log(big_l))
