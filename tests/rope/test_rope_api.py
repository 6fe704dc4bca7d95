"""reference.rope public API: semantics, worked examples, validation (issue 2)."""

import math

import mpmath
import numpy as np
import pytest

import reference.rope as R

BACKENDS = ("cpu", "numpy")
LAYOUTS = ("half", "interleaved")


def _ref_apply_loops(x, pos, r, base, layout):
    """Independent slow definition straight from RoFormer eq. 15 with math.cos/sin of the
    mpmath-exact angle (so it checks semantics, not rounding)."""
    out = np.array(x, dtype=np.float64)
    nb, ns, nh, _ = x.shape
    half = r // 2
    for b in range(nb):
        for s in range(ns):
            m = int(pos[b, s])
            for i in range(half):
                with mpmath.workprec(200):
                    ang = m * mpmath.mpf(base) ** (-mpmath.mpf(2 * i) / r)
                    c, sn = float(mpmath.cos(ang)), float(mpmath.sin(ang))
                j0, j1 = (i, i + half) if layout == "half" else (2 * i, 2 * i + 1)
                for h in range(nh):
                    a, bb = x[b, s, h, j0], x[b, s, h, j1]
                    out[b, s, h, j0] = a * c - bb * sn
                    out[b, s, h, j1] = a * sn + bb * c
    return out


# ---- worked examples from the seed document 000 ------------------------------------------


def test_seed_thetas_d512():
    theta = R.inv_freq(512)
    assert theta.shape == (256,)
    assert theta[0] == 1.0
    assert theta[1] == pytest.approx(10000.0 ** (-2 / 512), rel=1e-15)
    assert round(theta[1], 5) == 0.96466
    # The seed claims theta_255 ~ 1.58e-5. That is an arithmetic error in the source:
    # 10000**(-510/512) = 10**(-3.984375) = 1.0366e-4.
    assert theta[255] == pytest.approx(1.0366e-4, rel=1e-4)
    assert theta[255] == pytest.approx(10.0 ** (-4 * 510 / 512), rel=1e-15)
    assert abs(theta[255] - 1.58e-5) > 5e-5


@pytest.mark.parametrize("backend", BACKENDS)
def test_seed_pair_2_3_rotated_at_m1(backend):
    # theta_0 = 1 (pair 0 of any ladder): the pair [2, 3] at m = 1 turns by one radian.
    x = np.array([2.0, 3.0]).reshape(1, 1, 1, 2)
    out = R.apply(x, np.array([[1]]), backend=backend, layout="interleaved")[0, 0, 0]
    expected = [2 * math.cos(1) - 3 * math.sin(1), 2 * math.sin(1) + 3 * math.cos(1)]
    assert out == pytest.approx(expected, rel=1e-15)
    assert out == pytest.approx([-1.4438, 3.3038], abs=1e-4)
    # The seed's [-1.6245, 3.0252] is wrong: a rotation keeps the norm sqrt(13) = 3.606, and
    # that vector's norm is 3.43.
    assert math.hypot(*out) == pytest.approx(math.sqrt(13.0), rel=1e-15)


# ---- semantics ----------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("rotary_dim", [None, 6, 2])
def test_apply_matches_definition(backend, layout, rotary_dim):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 2, 8))
    pos = np.array([[0, 5, 4095], [-7, 2**24, 123456789]], dtype=np.int64)
    r = 8 if rotary_dim is None else rotary_dim
    got = R.apply(x, pos, rotary_dim=rotary_dim, base=500000.0, layout=layout, backend=backend)
    want = _ref_apply_loops(x, pos, r, 500000.0, layout)
    np.testing.assert_allclose(got, want, rtol=0, atol=4e-16 * np.abs(x).max())
    # the tail passes through bit-identically
    assert np.array_equal(got[..., r:], x[..., r:])


@pytest.mark.parametrize("backend", BACKENDS)
def test_rotation_sense_and_pair_positions(backend):
    # half: pair j is (j, j + r/2); a unit vector on element j turns towards element j + r/2.
    x = np.zeros((1, 1, 1, 4))
    x[..., 0] = 1.0
    out = R.apply(x, np.array([[1]]), layout="half", backend=backend)[0, 0, 0]
    assert out == pytest.approx([math.cos(1), 0.0, math.sin(1), 0.0], abs=1e-16)
    out = R.apply(x, np.array([[1]]), layout="interleaved", backend=backend)[0, 0, 0]
    assert out == pytest.approx([math.cos(1), math.sin(1), 0.0, 0.0], abs=1e-16)


@pytest.mark.parametrize("backend", BACKENDS)
def test_position_zero_is_identity_and_input_untouched(backend):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 3, 16)).astype(np.float32)
    keep = x.copy()
    out = R.apply(x, np.zeros((1, 2), dtype=np.int64), backend=backend)
    assert out.dtype == np.float64
    assert np.array_equal(out, x.astype(np.float64))
    assert np.array_equal(x, keep)


@pytest.mark.parametrize("backend", BACKENDS)
def test_nan_and_inf_propagate(backend):
    x = np.ones((1, 2, 1, 4))
    x[0, 0, 0, 1] = np.nan
    x[0, 1, 0, 3] = np.inf
    out = R.apply(x, np.array([[3, 4]]), backend=backend, layout="half")
    assert np.isnan(out[0, 0, 0, 1]) and np.isnan(out[0, 0, 0, 3])  # pair (1, 3)
    assert np.isfinite(out[0, 0, 0, [0, 2]]).all()
    assert not np.isfinite(out[0, 1, 0, [1, 3]]).all()


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.int32, np.uint8])
def test_any_real_dtype_converted_first(dtype):
    x = (np.arange(16) % 7).reshape(1, 1, 2, 8).astype(dtype)
    pos = np.array([[9]], dtype=np.int32)
    want = R.apply(x.astype(np.float64), pos.astype(np.int64), backend="numpy")
    for backend in BACKENDS:
        assert np.array_equal(R.apply(x, pos, backend=backend), want)


def test_non_contiguous_input():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 8, 3, 16))[:, ::2, :, :]
    pos = np.arange(8, dtype=np.int64).reshape(2, 4)[:, ::-1]
    a = R.apply(x, pos, backend="cpu")
    b = R.apply(np.ascontiguousarray(x), np.ascontiguousarray(pos), backend="cpu")
    assert np.array_equal(a, b)


def test_layout_permutation_maps_half_to_interleaved():
    perm = R.layout_permutation(8)
    assert perm.tolist() == [0, 2, 4, 6, 1, 3, 5, 7]
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 3, 2, 8))
    pos = np.array([[0, 17, -40000]])
    for backend in BACKENDS:
        inter = R.apply(x, pos, layout="interleaved", backend=backend)
        half = R.apply(x[..., perm], pos, layout="half", backend=backend)
        assert np.array_equal(half, inter[..., perm])


def test_complex_form_equals_interleaved_apply():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 2, 12))
    pos = rng.integers(-(2**24), 2**24, size=(2, 3))
    z = R.apply_complex(x, pos, rotary_dim=8, base=1e6)
    a = R.apply(x, pos, rotary_dim=8, base=1e6, layout="interleaved", backend="numpy")
    np.testing.assert_allclose(z, a, rtol=0, atol=1e-15 * np.abs(x).max())
    assert np.array_equal(z[..., 8:], x[..., 8:])
    fc = R.freqs_cis(pos, 8, 1e6)
    c, s = R.cos_sin(pos, 8, 1e6, backend="numpy")
    assert fc.dtype == np.complex128 and np.array_equal(fc.real, c) and np.array_equal(fc.imag, s)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_rotation_matrix_is_apply(layout):
    rng = np.random.default_rng(5)
    v = rng.standard_normal(8)
    mat = R.rotation_matrix(1234, 8, 10000.0, layout)
    np.testing.assert_allclose(mat @ mat.T, np.eye(8), atol=1e-15)
    assert np.linalg.det(mat) == pytest.approx(1.0, abs=1e-14)
    got = R.apply(v.reshape(1, 1, 1, 8), np.array([[1234]]), layout=layout, backend="numpy")
    np.testing.assert_allclose(got[0, 0, 0], mat @ v, rtol=0, atol=1e-15)


def test_rotate_pairs_applies_given_tables():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, 2, 1, 6))
    pos = np.array([[3, 8]])
    c, s = R.cos_sin(pos, 4, backend="numpy")
    out = R.rotate_pairs(x, c, s, layout="half", rotary_dim=4)
    assert np.array_equal(out, R.apply(x, pos, rotary_dim=4, backend="numpy"))
    # a mutant: sin negated (rotation reversed) equals position -m
    rev = R.rotate_pairs(x, c, -s, layout="half", rotary_dim=4)
    assert np.array_equal(rev, R.apply(x, -pos, rotary_dim=4, backend="numpy"))
    with pytest.raises(ValueError, match="^cos"):
        R.rotate_pairs(x, c[:, :1], s, layout="half", rotary_dim=4)


def test_angles_is_plain_product():
    theta = R.inv_freq(8, 1e4)
    pos = np.array([[1, 2**20]])
    ang = R.angles(pos, theta)
    assert ang.shape == (1, 2, 4)
    assert np.array_equal(ang, pos[..., None].astype(np.float64) * theta)


def test_inv_freq_correctly_rounded_and_dd():
    for r, base in [(128, 10000.0), (96, 500000.0), (256, 1e6), (6, 3.5)]:
        theta = R.inv_freq(r, base)
        hi, lo = R.inv_freq_dd(r, base)
        assert np.array_equal(theta, hi)
        with mpmath.workprec(300):
            for i in range(r // 2):
                exact = mpmath.mpf(base) ** (-mpmath.mpf(2 * i) / r)
                assert theta[i] == float(exact)  # mpmath's float() rounds to nearest
                rel = abs(mpmath.mpf(hi[i]) + mpmath.mpf(lo[i]) - exact) / exact
                assert rel < mpmath.mpf(2) ** -104
    # the cache hands out copies
    R.inv_freq(8)[0] = 5.0
    assert R.inv_freq(8)[0] == 1.0


def test_cos_sin_any_position_shape():
    pos = np.arange(24, dtype=np.int64).reshape(2, 3, 4)
    for backend in BACKENDS:
        c, s = R.cos_sin(pos, 10, backend=backend)
        assert c.shape == s.shape == (2, 3, 4, 5)
        np.testing.assert_allclose(c**2 + s**2, 1.0, atol=4e-16)


def test_empty_inputs():
    x = np.zeros((0, 3, 2, 4))
    for backend in BACKENDS:
        for mode in ("fast", "golden"):
            out = R.apply(x, np.zeros((0, 3), dtype=np.int64), backend=backend, mode=mode)
            assert out.shape == x.shape
            c, s = R.cos_sin(np.zeros((0, 2), dtype=np.int64), 6, backend=backend, mode=mode)
            assert c.shape == s.shape == (0, 2, 3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_golden_and_fast_agree_to_an_ulp(backend):
    rng = np.random.default_rng(9)
    x = rng.standard_normal((1, 4, 2, 16))
    pos = rng.integers(-(2**53), 2**53, size=(1, 4))
    fast = R.apply(x, pos, base=1e6, backend=backend)
    gold = R.apply(x, pos, base=1e6, backend=backend, mode="golden")
    assert np.abs(fast - gold).max() <= 4 * 2.0**-52 * np.abs(x).max()
    c, s = R.cos_sin(pos, 16, 1e6, backend=backend)
    cg, sg = R.cos_sin(pos, 16, 1e6, backend=backend, mode="golden")
    assert (np.abs(c - cg) <= 2 * np.spacing(np.abs(cg))).all()
    assert (np.abs(s - sg) <= 2 * np.spacing(np.abs(sg))).all()


# ---- frequencies registry ---------------------------------------------------------------


def test_frequencies_default():
    inv, factor = R.frequencies(64, 10000.0)
    assert factor == 1.0 and np.array_equal(inv, R.inv_freq(64))
    inv2, factor2 = R.frequencies(64, 10000.0, scaling={"rope_type": "default"}, seq_len=100)
    assert factor2 == 1.0 and np.array_equal(inv2, inv)
    assert "default" in R.ROPE_TYPES


def test_frequencies_unknown_type_lists_known():
    with pytest.raises(ValueError, match=r"unknown rope_type 'nope'.*default"):
        R.frequencies(64, scaling={"rope_type": "nope"})
    with pytest.raises(ValueError, match="^scaling"):
        R.frequencies(64, scaling="linear")
    with pytest.raises(ValueError, match="^seq_len"):
        R.frequencies(64, seq_len=-1)


# ---- validation ---------------------------------------------------------------------------

X = np.zeros((1, 2, 1, 8))
POS = np.zeros((1, 2), dtype=np.int64)


@pytest.mark.parametrize(
    "kwargs, arg",
    [
        ({"rotary_dim": 5}, "rotary_dim"),
        ({"rotary_dim": 10}, "rotary_dim"),
        ({"rotary_dim": 0}, "rotary_dim"),
        ({"rotary_dim": -2}, "rotary_dim"),
        ({"rotary_dim": 4.0}, "rotary_dim"),
        ({"rotary_dim": True}, "rotary_dim"),
        ({"positions": np.zeros((1, 3), dtype=np.int64)}, "positions"),
        ({"positions": np.zeros((2,), dtype=np.int64)}, "positions"),
        ({"positions": np.zeros((1, 2))}, "positions"),
        ({"positions": np.zeros((1, 2), dtype=bool)}, "positions"),
        ({"positions": np.full((1, 2), 2**60)}, "positions"),
        ({"base": float("nan")}, "base"),
        ({"base": float("inf")}, "base"),
        ({"base": 0.0}, "base"),
        ({"base": -10000.0}, "base"),
        ({"base": 0.5}, "base"),
        ({"base": 2.0**65}, "base"),
        ({"mode": "exact"}, "mode"),
        ({"mode": None}, "mode"),
        ({"base": "10000"}, "base"),
        ({"layout": "rotate_half"}, "layout"),
        ({"layout": None}, "layout"),
        ({"backend": "gpu"}, "backend"),
        ({"x": np.zeros((2, 1, 8))}, "x"),
        ({"x": np.zeros((1, 2, 1, 8), dtype=complex)}, "x"),
    ],
)
@pytest.mark.parametrize("backend", BACKENDS)
def test_apply_rejects_bad_input(kwargs, arg, backend):
    call = {"x": X, "positions": POS, "backend": backend, **kwargs}
    x = call.pop("x")
    positions = call.pop("positions")
    with pytest.raises(ValueError, match=f"^{arg}:"):
        R.apply(x, positions, **call)


def test_other_functions_validate():
    with pytest.raises(ValueError, match="^rotary_dim:"):
        R.inv_freq(7)
    with pytest.raises(ValueError, match="^base:"):
        R.inv_freq(8, base=-1.0)
    with pytest.raises(ValueError, match="^positions:"):
        R.cos_sin(np.array([1.5]), 8)
    with pytest.raises(ValueError, match="^rotary_dim:"):
        R.layout_permutation(3)
    with pytest.raises(ValueError, match="^position:"):
        R.rotation_matrix(1.0, 8)
    for too_far in (2**53 + 1, -(2**64)):
        with pytest.raises(ValueError, match="^position:"):
            R.rotation_matrix(too_far, 8)
    with pytest.raises(ValueError, match="^layout:"):
        R.rotation_matrix(1, 8, layout="x")
    with pytest.raises(ValueError, match="^positions:"):
        R.apply_complex(X, np.zeros((3, 2), dtype=np.int64))
    with pytest.raises(ValueError, match="^inv_freq:"):
        R.angles(POS, np.ones((2, 2)))
    with pytest.raises(ValueError, match="^mode:"):
        R.cos_sin(np.array([1]), 8, mode="golden ")
    with pytest.raises(ValueError, match="^base:"):
        R.cos_sin(np.array([1]), 8, base=0.999)
    with pytest.raises(ValueError, match="^base:"):
        R.rotation_matrix(1, 8, base=1e-3)
