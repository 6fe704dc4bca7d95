"""Fast Gaussian RoPE: K(m) rounded once per distinct |m| (kept across calls, not evaluated past a
proved underflow threshold), then one pass over x: bit for bit RoPE's fast rotation times
float64(K(m)), tail included."""

from __future__ import annotations

import numpy as np
import pytest

from reference import gaussian_rope as g
from reference import rope
from reference.gaussian_rope import core
from reference.numerics import phase

KERNELS = [g.DOCUMENT_KERNEL, {"a1": 0.0, "a2": 1.0, "s1": 1.0, "s2": 3.0},
           {"a1": 2.5, "a2": 0.0, "s1": 100.0, "s2": 1.0}, {"a1": 0.0, "a2": 0.0, "s1": 1.0, "s2": 1.0},
           {"a1": 1e-300, "a2": 5e-324, "s1": 2.0, "s2": 7.0}]


def _rounded(kernel, m):
    return phase.to_double(core._factor(kernel)(phase.PREC_BITS, int(m)))


@pytest.mark.parametrize("kernel", KERNELS)
def test_the_underflow_threshold_is_proved_and_close(kernel):
    zero = core.zero_from(core.check_kernel(kernel))
    assert all(_rounded(kernel, m) == 0.0 for m in (zero, zero + 1, zero + 7, 3 * zero + 5))
    if kernel is g.DOCUMENT_KERNEL:
        assert 772 <= zero <= 776 and _rounded(kernel, 770) > 0  # within a few of the last nonzero K


@pytest.mark.parametrize("kernel", KERNELS)
def test_fast_values_are_the_rounded_kernel_once_per_distance(kernel):
    zero = core.zero_from(core.check_kernel(kernel))
    pos = np.array([0, 1, -1, 5, zero - 1, -(zero - 2), zero, zero + 3, 2**40, -(2**53), 5, 0])
    want = [_rounded(kernel, m) for m in pos]
    core._fast_cache.clear()
    assert core.fast_kernel_values(pos, kernel).tolist() == want
    assert core.fast_kernel_values(pos[::-1], kernel).tolist() == want[::-1]  # from the cache


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_fast_apply_is_rope_times_the_rounded_kernel_bit_for_bit(layout):
    rng = np.random.default_rng(17)
    x = rng.standard_normal((2, 6, 3, 12)) * 10.0 ** rng.integers(-200, 200, size=(2, 6, 3, 12))
    x[0, 0, 0, :3] = [np.nan, -0.0, np.inf]
    pos = np.array([[0, 3, -3, 771, 772, 2**30], [5, 5, 760, -760, 1, 10**6]])
    keep = x.copy()
    got = g.apply(x, pos, kernel=g.DOCUMENT_KERNEL, rotary_dim=8, layout=layout)
    k = np.array([[_rounded(g.DOCUMENT_KERNEL, m) for m in row] for row in pos])
    want = rope.apply(x, pos, rotary_dim=8, layout=layout) * k[:, :, None, None]
    assert got.tobytes() == want.tobytes() and np.array_equal(x, keep, equal_nan=True)
