"""Regression from the reference-API audit (issue 23, section 6): gaussian_rope.kernel's fast mode
within FAST_KERNEL_ULPS (3) of the exact value wherever it is evaluated: at the seed document's own
kernel past m = 600 (exp's argument carried 559 u of error there: 204 to 221 ulps), for tiny widths
(s1 = 1e-300 gave NaN) and for amplitudes whose term would pass through a subnormal exp."""

import numpy as np
import pytest

from reference import gaussian_rope as g
from reference.gaussian_rope import core


def ulps(fast, golden):
    return np.abs(fast - golden) / np.spacing(np.maximum(np.abs(golden), 2.0**-1074))


def test_document_kernel_everywhere_it_is_not_zero():
    m = np.concatenate([np.arange(-800, 801), [669, 707, 10**6, 2**53]])
    golden = g.kernel(m, g.DOCUMENT_KERNEL, mode="golden")
    err = ulps(g.kernel(m, g.DOCUMENT_KERNEL), golden)
    assert err.max() <= core.FAST_KERNEL_ULPS
    assert err[np.flatnonzero(np.isin(m, [669, 707]))].max() <= 1  # measured: within 1 ulp


@pytest.mark.parametrize("kernel", [
    {"a1": 0.7, "a2": 0.3, "s1": 1e-300, "s2": 20.0},        # m / s1 overflows; 0 / 0 at m = 0 before
    {"a1": 1e300, "a2": 1e-300, "s1": 3.7, "s2": 1e200},      # a large: exp(-e) subnormal, a exp(-e) normal
    {"a1": 1.0, "a2": 0.0, "s1": 1e6, "s2": 1e-5},
    {"a1": 2.5, "a2": 0.5, "s1": 0.01, "s2": 2.0**40},
])
def test_extreme_parameters(kernel):
    m = np.concatenate([np.arange(-300, 301), [2**20, 3 * 10**7, -(2**40), 2**53]])
    fast, golden = g.kernel(m, kernel), g.kernel(m, kernel, mode="golden")
    assert not np.isnan(fast).any() and ulps(fast, golden).max() <= core.FAST_KERNEL_ULPS


def test_random_kernels():
    rng = np.random.default_rng(23)
    for _ in range(8):
        kernel = {"a1": float(10 ** rng.uniform(-300, 300)), "a2": float(rng.uniform(0, 2)),
                  "s1": float(10 ** rng.uniform(-3, 4)), "s2": float(10 ** rng.uniform(-1, 3))}
        m = np.unique(np.concatenate([rng.integers(-3000, 3000, 200), rng.integers(-(2**40), 2**40, 10)]))
        assert ulps(g.kernel(m, kernel), g.kernel(m, kernel, mode="golden")).max() <= core.FAST_KERNEL_ULPS, kernel


def test_score_fast_takes_the_accurate_kernel():
    # score's fast mode multiplies by kernel(n - m): at d = 669 it now carries K to 1 ulp
    q = np.zeros((1, 1, 1, 2)); q[..., 0] = 1.0
    k = q.copy()
    out = g.score(q, k, np.array([[0]]), np.array([[669]]), kernel=g.DOCUMENT_KERNEL, rotary_dim=2, base=1.0)
    golden = g.score(q, k, np.array([[0]]), np.array([[669]]), kernel=g.DOCUMENT_KERNEL, rotary_dim=2, base=1.0,
                     mode="golden")
    assert ulps(out, golden).max() <= core.FAST_KERNEL_ULPS + 2
