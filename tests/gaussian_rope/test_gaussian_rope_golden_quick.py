"""Gaussian RoPE golden mode on the cpu (issue 31: phase.scaled_rotate's certified quick phase with
K(m) as a scaled double-double) is bit for bit the value-by-value mpmath path (the numpy backend's
golden mode): positions across the range where K(m) x turns subnormal and then rounds to 0
(core.zero_from = 774 for the document's kernel), huge |m|, the scaled tail past rotary_dim,
extreme and non-finite inputs."""

import numpy as np

from reference import gaussian_rope
from reference.gaussian_rope import core
from tests.rope.test_stream_kernels_golden import stress_x

KERNEL = gaussian_rope.DOCUMENT_KERNEL


def test_golden_cpu_is_the_mpmath_path_bit_for_bit_across_the_zero_threshold():
    rng = np.random.default_rng(314)
    m = np.array([[0, 1, -5, 650, 700, -730, 760, 770, 774, 790, 5000, 2**40]])
    with np.errstate(over="ignore"):  # 2^1000 planted by stress_x turns into inf: a non-finite input
        x = stress_x(rng, (1, m.shape[1], 2, 12)) * 2.0**40  # large inputs keep K(m) x above 2^-1075 longer
    x[0, 0, 0, 1], x[0, 3, 1, 9] = np.nan, np.inf
    got = gaussian_rope.apply(x, m, kernel=KERNEL, rotary_dim=8, mode="golden")
    want = gaussian_rope.apply(x, m, kernel=KERNEL, rotary_dim=8, mode="golden", backend="numpy")
    assert np.array_equal(np.isnan(got), np.isnan(want))
    keep = ~np.isnan(want)
    assert got[keep].tobytes() == want[keep].tobytes()
    sub = np.abs(want[np.isfinite(want)])
    assert np.any((sub > 0) & (sub < 2.0**-1022))  # the subnormal results were exercised


def test_golden_kernel_values_are_k_within_the_stated_bound():
    import mpmath

    flat = np.array([0, 3, -3, 700, 800, 10**6], dtype=np.int64)
    rows, frel = core.golden_kernel_values(flat, KERNEL)
    for m, (fh, fl, fe, fd) in zip(flat.tolist(), rows[:, 0]):
        with mpmath.workprec(700):
            exact = core.kernel_mp(m, KERNEL)
            assert abs(mpmath.ldexp(mpmath.mpf(fh) + mpmath.mpf(fl), int(fe)) / exact - 1) <= frel
