"""Regressions from the reference-API audit (issue 23, section 6) for the RoPE scaling types.

YaRN with both correction-range clamps binding, checked against an mpmath reading of HF's
``_compute_yarn_parameters`` written here; YaRN at base 1 and LongRoPE at L = 1 refused in one line.
"""

import mpmath
import numpy as np
import pytest

import reference.rope as rope
from reference.numerics import scaling_oracle
from reference.numerics.frequencies import scaled_table

BOTH_CLAMPS = {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 2, "beta_slow": 1e-9}


def hf_yarn(dim, base, factor, big_l, beta_fast=32, beta_slow=1, truncate=True):
    """HF _compute_yarn_parameters' inv_freq, step by step in mpmath (its float32 ramp made exact)."""
    b = mpmath.mpf(base)

    def correction_dim(rot):
        return dim * mpmath.log(big_l / (rot * 2 * mpmath.pi)) / (2 * mpmath.log(b))

    low, high = correction_dim(mpmath.mpf(beta_fast)), correction_dim(mpmath.mpf(beta_slow))
    if truncate:
        low, high = mpmath.floor(low), mpmath.ceil(high)
    low, high = mpmath.mpf(max(low, 0)), mpmath.mpf(min(high, dim - 1))
    if low == high:
        high += mpmath.mpf("0.001")
    out = []
    for k in range(dim // 2):
        pos_freq = b ** (mpmath.mpf(2 * k) / dim)
        extrapolation_factor = 1 - min(max((k - low) / (high - low), 0), 1)
        out.append(1 / (factor * pos_freq) * (1 - extrapolation_factor) + 1 / pos_freq * extrapolation_factor)
    return out


@pytest.mark.parametrize("params", [
    BOTH_CLAMPS,
    dict(BOTH_CLAMPS, truncate=False),
    {"rope_type": "yarn", "factor": 3.0, "original_max_position_embeddings": 4, "beta_fast": 64.0,
     "beta_slow": 1e-12},
])
def test_yarn_both_clamps_correctly_rounded(params):
    # Both clamps bind (low = 0, high = r - 1): the ramp i / (r - 1) was a Python float, so theta'
    # carried a float64 rounding into the "exact" value and the golden angles m * theta'.
    r, base = 8, 1e4
    got, _ = rope.frequencies(r, base, params)
    with mpmath.workprec(300):
        want = hf_yarn(r, base, mpmath.mpf(params["factor"]), mpmath.mpf(params["original_max_position_embeddings"]),
                       params.get("beta_fast", 32), params["beta_slow"], params.get("truncate", True))
        oracle, _ = scaling_oracle.exact(params, r, base, None)
        for g, w, o in zip(got, want, oracle):
            assert abs(o - w) < mpmath.mpf(2) ** -280 * abs(w)  # the certifying oracle agrees
            assert g == float(w)  # correctly rounded
        # The table's double-double tail carries the exact value too (the golden angles use it).
        table, _ = scaled_table(r, base, params)
        for hi, lo, w in zip(table.hi, table.lo, want):
            assert abs(mpmath.mpf(hi) + mpmath.mpf(lo) - w) <= mpmath.mpf(2) ** -100 * w


def test_yarn_both_clamps_golden_angles():
    # At position 2**40 a float ramp moved the angle by ~1e-5 rad; golden cos must match mpmath.
    m = 2**40
    cos, sin = rope.cos_sin(np.array([m]), 8, 1e4, scaling=BOTH_CLAMPS, mode="golden")
    with mpmath.workprec(300):
        want = hf_yarn(8, 1e4, mpmath.mpf(2), mpmath.mpf(2), 32, 1e-9)
        factor = 1 + mpmath.log(2) / 10
        for k, t in enumerate(want):
            assert cos[0, k] == float(mpmath.cos(m * t) * factor)
            assert sin[0, k] == float(mpmath.sin(m * t) * factor)


def test_yarn_base_one_refused():
    with pytest.raises(ValueError, match=r"^base: yarn") as err:
        rope.frequencies(8, 1.0, {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 64})
    assert "\n" not in str(err.value)


def test_longrope_length_one_refused():
    params = {"rope_type": "longrope", "factor": 2.0, "original_max_position_embeddings": 1,
              "short_factor": [1.0] * 4, "long_factor": [2.0] * 4}
    with pytest.raises(ValueError, match="original_max_position_embeddings") as err:
        rope.frequencies(8, 1e4, params)
    assert "\n" not in str(err.value)
    # An explicit attention factor, or factor 1, needs no ln L: still accepted.
    inv, f = rope.frequencies(8, 1e4, dict(params, attention_factor=1.5))
    assert f == 1.5 and inv[0] == 1.0
    assert rope.frequencies(8, 1e4, dict(params, factor=1.0))[1] == 1.0
