"""Building blocks of reference/numerics/ddmath.py: error-free transformations, the exact integer
reduction, the golden double-double sin/cos, the rounding test, and their constants."""

import math
from fractions import Fraction

import mpmath
import numba
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from reference.numerics import ddmath, numpy_twin, phase
from reference.rope import oracle

finite = st.floats(-1e30, 1e30, allow_nan=False, allow_infinity=False)
# The same functions compiled with numba.njit (the CPU kernels' family, not inlined here).
NJIT = ddmath.jit_family(numba.njit, numba.njit(ddmath.mul))
TABLE = phase.ladder(256, 1e6)


def _scratch():
    return np.zeros(ddmath.MAX_LIMBS, dtype=np.uint64)


def test_constants_are_right():
    with mpmath.workprec(400):
        pio2 = mpmath.mpf(ddmath.PIO2_HI) + mpmath.mpf(ddmath.PIO2_LO)
        assert abs(pio2 - mpmath.pi / 2) < mpmath.mpf(2) ** -106
        for j in range(len(ddmath.SIN_TAB_HI)):
            x = mpmath.mpf(j) / 64
            s = mpmath.mpf(ddmath.SIN_TAB_HI[j]) + mpmath.mpf(ddmath.SIN_TAB_LO[j])
            c = mpmath.mpf(ddmath.COS_TAB_HI[j]) + mpmath.mpf(ddmath.COS_TAB_LO[j])
            assert abs(s - mpmath.sin(x)) <= mpmath.mpf(2) ** -106 * abs(mpmath.sin(x)) + 0
            assert abs(c - mpmath.cos(x)) <= mpmath.mpf(2) ** -106
        # the table covers |a| <= pi/4: j = round(64 a) <= 50
        assert len(ddmath.SIN_TAB_HI) * 1.0 / 64 > math.pi / 4 + 1 / 128
        for k in range(len(ddmath.SIN_C_HI)):
            want = mpmath.mpf(-1) ** k / mpmath.factorial(2 * k + 1)
            got = mpmath.mpf(ddmath.SIN_C_HI[k]) + mpmath.mpf(ddmath.SIN_C_LO[k])
            assert abs(got - want) <= mpmath.mpf(2) ** -106 * abs(want)


@given(finite, finite)
def test_two_sum_and_two_prod_are_exact(a, b):
    # Dekker's product is exact unless its error term underflows (|a b| < 2**-969).
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


def _exact_quarter_turns(um, row, table):
    """um * v (the truncated fixed-point v of the table) mod 4 with Python integers: (q, phi)
    with phi a Fraction in [-1/2, 1/2)."""
    limbs = [int(x) for x in table.limbs[row]]
    frac_bits = 32 * (len(limbs) - 1)
    v = 0
    for limb in limbs:
        v = (v << 32) | limb
    prod = um * v  # exact, in units of 2**-frac_bits
    whole, rest = divmod(prod, 1 << frac_bits)
    if 2 * rest >= 1 << frac_bits:
        whole, rest = whole + 1, rest - (1 << frac_bits)
    return whole % 4, Fraction(rest, 1 << frac_bits)


@given(st.integers(0, 2**53), st.integers(0, TABLE.count - 1))
def test_quarter_turns_is_the_exact_integer_product(um, row):
    q_want, phi_want = _exact_quarter_turns(um, row, TABLE)
    f_bits = 32 * TABLE.frac_limbs
    for fam in (ddmath, NJIT):
        q, hi, lo, exact = fam.quarter_turns(np.uint64(um), TABLE.limbs, row, _scratch())
        assert int(q) == q_want
        got = Fraction(hi) + Fraction(lo)
        if exact:
            assert phi_want == 0
            continue
        # the double-double keeps > 104 bits of phi; the centring may drop one unit of 2**-32F
        tol = abs(phi_want) * Fraction(1, 2**104) + Fraction(1, 2**f_bits)
        assert abs(got - phi_want) <= tol, (um, row)


def test_quarter_turns_near_zero_and_half():
    # positions where m v is within 2**-60 of an integer (convergent denominators), and the
    # centring boundary phi = +-1/2
    for row in (3, 40, 127):
        for q in oracle.near_zero_positions(TABLE.mp_values(400)[row])[-5:]:
            q_want, phi_want = _exact_quarter_turns(q, row, TABLE)
            _, hi, lo, _ = ddmath.quarter_turns(np.uint64(q), TABLE.limbs, row, _scratch())
            assert abs(Fraction(hi) + Fraction(lo) - phi_want) <= abs(phi_want) / 2**104


@given(st.lists(st.integers(-(2**53), 2**53), min_size=1, max_size=6))
def test_twin_quarter_turns_is_exact(ms):
    # The NumPy twin's reduction against exact rational arithmetic on its own chunks: the
    # quadrant exactly, the centred fraction to 2**-104 relative.
    q, f_hi, f_lo = numpy_twin.quarter_turns(np.array(ms, dtype=np.int64), TABLE)
    w = [sum(Fraction(float(c)) for c in TABLE.chunks[:, i]) for i in range(TABLE.count)]
    for t, m in enumerate(ms):
        for i in (0, 5, 64, 127):
            prod = m * w[i]
            whole = math.floor(prod + Fraction(1, 2))
            frac = prod - whole
            got = Fraction(float(f_hi[t, i])) + Fraction(float(f_lo[t, i]))
            assert int(q[t, i]) == whole % 4 or (abs(frac) == Fraction(1, 2))
            assert abs(got - frac) <= abs(frac) / 2**104


@given(st.integers(-(2**53), 2**53), st.integers(0, 127))
def test_reduced_angle_is_accurate(m, row):
    with mpmath.workprec(600):
        theta = TABLE.mp_values(600)[row]
        ang = m * theta
        k = mpmath.nint(ang / (mpmath.pi / 2))
        want = ang - k * mpmath.pi / 2
        for fam in (ddmath, NJIT):
            q, hi, lo, negative, _ = fam.reduced_angle(m, TABLE.limbs, row, _scratch())
            a = mpmath.mpf(hi) + mpmath.mpf(lo)
            assert abs(hi) <= math.pi / 4 * (1 + 2.0**-50)
            assert negative == (m < 0)
            # |m| (q pi/2 + a) is m theta up to a multiple of 2 pi
            turned = (int(q) * mpmath.pi / 2 + a) * (-1 if m < 0 else 1)
            diff = (turned - ang) / (2 * mpmath.pi)
            assert abs(diff - mpmath.nint(diff)) * 2 * mpmath.pi <= abs(want) * mpmath.mpf(2) ** -100


@given(st.floats(-math.pi / 4, math.pi / 4), st.floats(-1.0, 1.0))
def test_golden_sincos_of_small_angle(ah, frac):
    al = frac * math.ulp(ah) / 2 if ah else 0.0
    with mpmath.workprec(300):
        a = mpmath.mpf(ah) + mpmath.mpf(al)
        ws, wc = mpmath.sin(a), mpmath.cos(a)
        for fam in (ddmath, NJIT):
            sh, sl, ch, cl = fam.sincos_small_dd(ah, al)
            bound = mpmath.mpf(2) ** -100
            assert abs(mpmath.mpf(sh) + mpmath.mpf(sl) - ws) <= bound * abs(ws)
            assert abs(mpmath.mpf(ch) + mpmath.mpf(cl) - wc) <= bound * abs(wc)


@given(st.floats(1e-300, 1e300), st.floats(-0.5, 0.5), st.floats(0.0, 2.0**-40))
def test_round_dd_never_certifies_a_wrong_rounding(h, frac, rel):
    # h + l with |l| <= ulp(h)/2; an error bound err: if round_dd says "certain", then both
    # h + l - err and h + l + err round to the returned double.
    for sign in (1.0, -1.0):
        hh = sign * h
        l = frac * math.ulp(hh)
        err = rel * abs(hh)
        for fam in (ddmath, NJIT):
            r, ok = fam.round_dd(hh, l, err)
            exact = Fraction(hh) + Fraction(l)
            # float(Fraction) is correctly rounded (CPython's exact integer true division)
            assert r == float(exact)
            if ok:
                for end in (exact - Fraction(err), exact + Fraction(err)):
                    assert float(end) == r


def test_round_dd_at_ties_and_powers_of_two():
    one = 1.0
    # exactly halfway between 1 and its successor: uncertain for any err > 0, and certain only
    # if exact (err = 0) -- then fl() already rounds ties to even
    r, ok = ddmath.round_dd(one, 2.0**-53, 0.0)
    assert r == 1.0 and not ok
    r, ok = ddmath.round_dd(one, 2.0**-54, 2.0**-60)
    assert r == 1.0 and ok
    # below a power of two the gap is half as wide
    r, ok = ddmath.round_dd(one, -(2.0**-55), 2.0**-60)
    assert r == 1.0 and ok
    r, ok = ddmath.round_dd(one, -(2.0**-54), 2.0**-60)
    assert r == 1.0 and not ok
    assert ddmath.round_dd(0.0, 0.0, 0.0) == (0.0, True)
    assert ddmath.round_dd(0.0, 0.0, 1e-300)[1] is False


def test_njit_and_python_versions_give_identical_bits():
    rng = np.random.default_rng(0)
    sc = _scratch()
    for m in rng.integers(-(2**53), 2**53, size=100):
        for row in (0, 17, 127):
            assert ddmath.sincos_fast(int(m), TABLE.limbs, row, sc) == NJIT.sincos_fast(
                m, TABLE.limbs, row, sc
            )
            assert ddmath.sincos_golden(int(m), TABLE.limbs, row, sc) == NJIT.sincos_golden(
                m, TABLE.limbs, row, sc
            )


@pytest.mark.parametrize("a, b", [(0.75, -0.25), (1e-250, 3.0), (0.0, 0.0), (2.0**995, 1.0), (-3.5, 1e-240)])
def test_rotate_golden_flags_what_it_cannot_certify(a, b):
    sh, sl, ch, cl = ddmath.sincos_small_dd(0.3, 1e-18)
    o0, o1, ok = ddmath.rotate_golden(a, b, sh, sl, ch, cl)
    in_range = all(v == 0 or 2.0**-800 <= abs(v) <= 2.0**990 for v in (a, b))
    if not in_range:
        assert not ok
    else:
        assert ok
        with mpmath.workprec(300):
            c = mpmath.mpf(ch) + mpmath.mpf(cl)
            s = mpmath.mpf(sh) + mpmath.mpf(sl)
            assert o0 == oracle.nearest_double(a * c - b * s)
            assert o1 == oracle.nearest_double(a * s + b * c)


def test_cpu_kernel_cache_is_tied_to_ddmath_source():
    # Numba's disk cache only watches the kernel's own file; the kernels close over the digest
    # of ddmath.py so that editing it invalidates them.
    import hashlib
    import pathlib

    from reference.numerics import cpu_kernels

    digest = hashlib.sha256(pathlib.Path(ddmath.__file__).read_bytes()).hexdigest()
    assert len(cpu_kernels.KERNELS) == 4
    for kernel in cpu_kernels.KERNELS:
        cells = [c.cell_contents for c in kernel.py_func.__closure__]
        assert digest in cells
