"""The budget formulas (conformance.core.tolerance and conformance.rope.budgets; derivation in
docs/tolerance.md)."""

import math

import numpy as np
import pytest

from conformance.core import tolerance as T
from conformance.core import rotation_budgets as B


def test_unit_roundoffs_match_torch():
    import torch

    for name in T.DTYPES:
        assert T.unit_roundoff(name) == torch.finfo(getattr(torch, name)).eps / 2
        assert T.SMALLEST_SUBNORMAL[name] == torch.finfo(getattr(torch, name)).smallest_normal * torch.finfo(
            getattr(torch, name)
        ).eps


def test_standard_admits_float32_tables_even_for_float64():
    assert T.table_roundoff("float64", "standard") == 2.0**-24
    assert T.table_roundoff("float64", "strict") == 2.0**-53
    assert T.table_roundoff("bfloat16", "strict") == 2.0**-8


def test_sums_accumulate_in_float32_or_finer():
    """accumulation_roundoff: half dtypes add in float32 in both profiles; float32 and float64
    follow the table unit, so the accumulation unit is never coarser than u_tab."""
    for profile in T.PROFILES:
        assert T.accumulation_roundoff("bfloat16", profile) == T.accumulation_roundoff("float16", profile) == 2.0**-24
        assert T.accumulation_roundoff("float32", profile) == 2.0**-24
        for name in T.DTYPES:
            assert T.accumulation_roundoff(name, profile) <= T.table_roundoff(name, profile)
    assert T.accumulation_roundoff("float64", "standard") == 2.0**-24
    assert T.accumulation_roundoff("float64", "strict") == 2.0**-53


def test_rotation_budget_formula():
    mag, phi, r, base = 2.0, 1000.0, 128, 1e4
    b = B.rotation_budget(np.full(64, mag), np.full(64, phi), r, base, "bfloat16", "standard")
    e = 2 * np.arange(64) / r
    # three roundings of the exponent -ln(base) e_i (docs/tolerance.md, section 3), five of the angle
    expected = 3 * 2.0**-8 * mag + 2.0**-24 * (3 * math.log(base) * e + 5) * phi * mag + 3 * 2.0**-133
    np.testing.assert_allclose(b, expected, rtol=1e-15)


def test_strict_is_tighter_and_position_independent_below_float64():
    mag = np.ones(4)
    for dtype in ("float32", "float16", "bfloat16"):
        near = B.rotation_budget(mag, np.zeros(4), 8, 1e4, dtype, "strict")
        far = B.rotation_budget(mag, np.full(4, 2.0**24), 8, 1e4, dtype, "strict")
        # float64 angles at 2**24 add at most 35 % (float32, base 1e4: 2**24 u_64 (3 ln(1e4) + 5) against
        # 3 u_32; 15 % when the exponent was charged one rounding) to the position-independent part
        assert np.all(far < near * 1.35)
        assert np.all(B.rotation_budget(mag, np.full(4, 2.0**24), 8, 1e4, dtype, "standard") > far)


def test_budget_grows_with_the_angle_in_standard():
    phi = np.array([0.0, 1e2, 1e4, 1e6])
    b = B.rotation_budget(np.ones(4), phi, 2, 1e4, "float32", "standard")
    assert np.all(np.diff(b) > 0)


def test_ratio_semantics():
    r = T.ratio(np.array([0.0, 1.0, np.nan, 1.0]), np.array([0.0, 2.0, 1.0, 0.0]))
    assert r[0] == 0 and r[1] == 0.5 and np.isinf(r[2]) and np.isinf(r[3])


def test_frequency_budget_is_relative():
    theta = np.array([1.0, 1e-4])
    b = B.frequency_budget(theta, 4, 1e4, "float32", "standard")
    assert b[1] / b[0] < 1e-3


@pytest.mark.parametrize("bad", [("float8", "standard"), ("float32", "loose")])
def test_bad_names(bad):
    with pytest.raises(ValueError):
        T.table_roundoff(*bad)
