"""YaRN: NTK-by-parts interpolation with a linear ramp over the pair index, and an attention factor.

Frequencies (HF ``_compute_yarn_parameters``, jquesnelle/yarn ``LlamaYaRNScaledRotaryEmbedding``;
paper: Peng et al., arXiv 2309.00071, eqs. 17-20):

    d(n) = r ln(L / (2 pi n)) / (2 ln b)        the pair index whose wavelength fits n times in L
    low = max(floor(d(beta_fast)), 0), high = min(ceil(d(beta_slow)), r - 1)
                                                (no floor/ceil with truncate=False; high += 0.001
                                                when low == high)
    ramp_i = clamp((i - low) / (high - low), 0, 1)
    theta'_i = theta_i / s * ramp_i + theta_i * (1 - ramp_i)

L is ``original_max_position_embeddings``, s = ``factor``. The attention factor (a multiplier
on cos and sin) is, as HF's ``_compute_yarn_parameters`` decides it:

- ``attention_factor`` when given (the final value: Laguna-XS.2 sets 1.0 at factor 64);
- else get_mscale(s, mscale) / get_mscale(s, mscale_all_dim) when both are given and non-zero
  (HF tests ``if mscale and mscale_all_dim``; DeepSeek-V2's 0.707 / 0.707 gives 1);
- else get_mscale(s) = 0.1 ln s + 1 (paper eq. 22): also when mscale_all_dim is 0 (Qwen3.6's
  mscale 1, mscale_all_dim 0), whatever mscale is;

with get_mscale(s, m) = 1 for s <= 1 and 0.1 m ln s + 1 otherwise.
"""

import mpmath

from ._params import at_least_one, flag, length, non_negative, positive

REQUIRED = {"factor": at_least_one, "original_max_position_embeddings": length}
OPTIONAL = {"beta_fast": positive, "beta_slow": positive, "attention_factor": positive,
            "mscale": non_negative, "mscale_all_dim": non_negative, "truncate": flag}
SOURCE = "https://arxiv.org/abs/2309.00071"


def correction_dim(n, r, base_ln, big_l):
    return r * mpmath.log(big_l / (n * 2 * mpmath.pi)) / (2 * base_ln)


def get_mscale(s, m=1):
    return mpmath.mpf(1) if s <= 1 else mpmath.mpf(m) * mpmath.log(s) / 10 + 1


def attention_factor(s, params):
    if "attention_factor" in params:
        return mpmath.mpf(params["attention_factor"])
    if params.get("mscale") and params.get("mscale_all_dim"):  # HF: both given and non-zero
        return get_mscale(s, params["mscale"]) / get_mscale(s, params["mscale_all_dim"])
    return get_mscale(s)


def frequencies(theta, r, base, params, seq_len):
    if base == 1:  # d(n) divides by ln b: the correction range does not exist at base 1
        raise ValueError(f"base: yarn scaling needs base > 1 (its correction range divides by ln base), "
                         f"got {float(base)!r}")
    s = mpmath.mpf(params["factor"])
    big_l = mpmath.mpf(params["original_max_position_embeddings"])
    base_ln = mpmath.log(base)
    low = correction_dim(mpmath.mpf(params.get("beta_fast", 32)), r, base_ln, big_l)
    high = correction_dim(mpmath.mpf(params.get("beta_slow", 1)), r, base_ln, big_l)
    if params.get("truncate", True):
        low, high = mpmath.floor(low), mpmath.ceil(high)
    # The clamps are mpf too: with both binding, Python ints would make the ramp i / (r - 1) a float.
    low, high = max(low, mpmath.mpf(0)), min(high, mpmath.mpf(r - 1))
    if low == high:
        high += mpmath.mpf("0.001")
    out = []
    for i, t in enumerate(theta):
        ramp = min(max((i - low) / (high - low), 0), 1)
        out.append(t / s * ramp + t * (1 - ramp))
    return out, attention_factor(s, params)
