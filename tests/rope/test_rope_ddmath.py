"""Double-double building blocks (reference/rope/ddmath.py): exactness and the 2*pi constant."""

from fractions import Fraction

import mpmath
import numba
import numpy as np
from hypothesis import assume, given
from hypothesis import strategies as st

from reference.rope import ddmath, numpy_twin

finite = st.floats(-1e30, 1e30, allow_nan=False, allow_infinity=False)
NJIT = ddmath.jit_family(numba.njit, numba.njit(ddmath.mul))


def test_two_pi_parts_sum_to_two_pi():
    with mpmath.workprec(400):
        total = (
            mpmath.mpf(ddmath.TWO_PI_1) + mpmath.mpf(ddmath.TWO_PI_2) + mpmath.mpf(ddmath.TWO_PI_3)
        )
        assert abs(total - 2 * mpmath.pi) < mpmath.mpf(2) ** -155
        assert ddmath.TWO_PI_1 == float(2 * mpmath.pi)
        assert ddmath.INV_TWO_PI == float(1 / (2 * mpmath.pi))


@given(finite, finite)
def test_two_sum_and_two_prod_are_exact(a, b):
    # Dekker's product is exact unless its error term underflows (|a b| < 2**-969); RoPE's
    # products (positions times theta >= 1e-6) are nowhere near that.
    assume(a == 0.0 or b == 0.0 or abs(a * b) > 2.0**-960)
    for fam in (ddmath, NJIT):
        s, e = fam.two_sum(a, b)
        assert s == a + b and Fraction(s) + Fraction(e) == Fraction(a) + Fraction(b)
        p, e = fam.two_prod(a, b)
        assert p == a * b and Fraction(p) + Fraction(e) == Fraction(a) * Fraction(b)
    # the NumPy twin's own vectorised versions
    s, e = numpy_twin._two_sum(np.array([a]), np.array([b]))
    assert Fraction(float(s[0])) + Fraction(float(e[0])) == Fraction(a) + Fraction(b)
    p, e = numpy_twin._two_prod(np.array([a]), np.array([b]))
    assert Fraction(float(p[0])) + Fraction(float(e[0])) == Fraction(a) * Fraction(b)


@given(st.integers(-(2**31), 2**31), st.integers(0, 127))
def test_reduced_angle_is_accurate(m, i):
    theta = mpmath.mpf(10000.0) ** (-mpmath.mpf(2 * i) / 256)
    hi = float(theta)
    lo = float(theta - mpmath.mpf(hi))
    with mpmath.workprec(300):
        exact = mpmath.mpf(m) * (mpmath.mpf(hi) + mpmath.mpf(lo))
        k = mpmath.nint(exact / (2 * mpmath.pi))
        want = exact - k * 2 * mpmath.pi
        for fam in (ddmath, NJIT):
            r_hi, r_lo = fam.reduced_angle(float(m), hi, lo)
            assert abs(r_hi) <= 3.1416
            assert abs(mpmath.mpf(r_hi) + mpmath.mpf(r_lo) - want) < mpmath.mpf(2) ** -70


def test_njit_and_python_versions_give_identical_bits():
    rng = np.random.default_rng(0)
    for m in rng.integers(-(2**31), 2**31, size=200):
        for t_hi, t_lo in ((1.0, 0.0), (0.8659643233600653, 5.66235216e-18)):
            assert ddmath.sincos_angle(float(m), t_hi, t_lo) == NJIT.sincos_angle(
                float(m), t_hi, t_lo
            )


def test_cpu_kernel_cache_is_tied_to_ddmath_source():
    # Numba's disk cache only watches the kernel's own file; the kernels close over the digest
    # of ddmath.py so that editing it invalidates them.
    import hashlib
    import pathlib

    from reference.rope import cpu_kernels

    digest = hashlib.sha256(pathlib.Path(ddmath.__file__).read_bytes()).hexdigest()
    for kernel in (cpu_kernels.apply_kernel, cpu_kernels.cos_sin_kernel):
        cells = [c.cell_contents for c in kernel.py_func.__closure__]
        assert digest in cells
