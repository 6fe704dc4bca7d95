"""conformance.rope.diagnosis: the closest reference mutant names the fault.

Faulty outputs are built here directly from reference.rope (independently of the examples) and
rounded to the dtype under test, so each code is checked against an output whose bug is known.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import reference.rope as rr
from conformance.rope import diagnosis as dg
from conformance.results import Diagnosis
from conformance.rope.spec import RopeSpec
from reference.golden.store import GoldenCase

CODES = {"layout-swapped", "rotation-reversed", "position-offset", "positions-ignored", "wrong-base",
         "frequency-exponent", "angle-precision", "pair-angle-mismatch", "rotary-dim-mismatch",
         "attention-factor", "scaling-mismatch", "input-mutated", "dtype-changed", "shape-changed",
         "non-finite", "raised", "crashed", "timeout", "not-deterministic"}

LEFT_PADDED = np.stack([np.arange(10), np.arange(33, 43)])


def rng_x(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def rounded(a, dtype):
    return dg.round_to(a, dtype)


def rotate(x, phi, layout, rotary_dim, scale=1.0):
    return rr.rotate_pairs(x, scale * np.cos(phi), scale * np.sin(phi), layout=layout, rotary_dim=rotary_dim)


def float32_angles(positions, theta):
    """The angle a mainstream implementation computes: float32 theta times float32 m, rounded."""
    return dg.round_to(dg.round_to(np.asarray(positions, float), "float32")[..., None]
                       * dg.round_to(theta, "float32"), "float32")


def setup(spec, positions, dtype="float32", seed=0, heads=2):
    pos = np.asarray(positions, dtype=np.int64)
    x = rounded(rng_x(pos.shape + (heads, spec.head_dim), seed), dtype)
    theta = rr.inv_freq(spec.rotary_dim, spec.base)
    return x, pos, theta


def codes(found):
    assert all(isinstance(d, Diagnosis) and d.code in CODES and d.message for d in found)
    return [d.code for d in found]


SPEC = RopeSpec(128, 128, 5e5, "half")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_correct_float32_angle_outputs_are_not_diagnosed(dtype):
    for spec in (SPEC, RopeSpec(64, 16, 1e4, "interleaved")):
        for pos in (LEFT_PADDED, np.array([[4095]]), np.array([[2**20, 2**24]]), np.array([[0, 0, 0]])):
            x, pos, theta = setup(spec, pos, dtype)
            out = rounded(rotate(x, float32_angles(pos, theta), spec.layout, spec.rotary_dim), dtype)
            assert dg.diagnose_apply(x, pos, out, spec, dtype) == []


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_each_angle_bug_gets_its_code(dtype):
    spec = SPEC
    x, pos, theta = setup(spec, LEFT_PADDED, dtype, seed=1)
    m = pos.astype(float)[..., None]
    r, b = spec.rotary_dim, spec.base
    i = np.arange(r // 2)
    low = "float16" if dtype == "float32" else "bfloat16"
    cases = {
        "rotation-reversed": -m * theta,
        "position-offset": (m + 3) * theta,
        "positions-ignored": np.broadcast_to(np.arange(pos.shape[1])[None, :, None] * theta, m.shape[:2] + (r // 2,)),
        "wrong-base": m * rr.inv_freq(r, 123456.0),
        "frequency-exponent": m * b ** (-(i + 1.0) * 2 / r),
        "scaling-mismatch": m * rr.inv_freq(r, b * 4 ** (r / (r - 2))),  # NTK-aware, factor 4
        # float16 angles hide in bfloat16 rounding at these short positions: use bfloat16 there.
        "angle-precision": rounded(rounded(m, low) * rounded(theta, low), low),
    }
    for code, phi in cases.items():
        out = rounded(rotate(x, phi, "half", r), dtype)
        assert codes(dg.diagnose_apply(x, pos, out, spec, dtype)) == [code], code


def test_offsets_are_estimated_beyond_the_enumerated_ones():
    x, pos, theta = setup(SPEC, LEFT_PADDED, seed=2)
    for k in (17, -250, 4096):
        out = rotate(x, (pos + k)[..., None] * theta, "half", 128)
        found = dg.diagnose_apply(x, pos, out, SPEC, "float32")
        assert codes(found) == ["position-offset"]
        assert found[0].message == f"positions shifted by {k:+d}"


def test_fitted_base_is_reported():
    x, pos, theta = setup(SPEC, LEFT_PADDED, seed=3)
    out = rotate(x, pos[..., None] * rr.inv_freq(128, 31337.0), "half", 128)
    found = dg.diagnose_apply(x, pos, out, SPEC, "float32")
    assert codes(found) == ["wrong-base"]
    assert "base 31337" in found[0].message and "500000" in found[0].message


def test_structural_bugs():
    spec = RopeSpec(64, 64, 1e4, "interleaved")
    x, pos, theta = setup(spec, LEFT_PADDED, "bfloat16", seed=4)
    phi = pos[..., None] * theta
    swapped = rotate(x, phi, "half", 64)
    assert codes(dg.diagnose_apply(x, pos, rounded(swapped, "bfloat16"), spec, "bfloat16")) == ["layout-swapped"]
    crossed = dg.rotate_elementwise(x, phi, rotate="interleaved", expand="cat", rotary_dim=64)
    assert codes(dg.diagnose_apply(x, pos, crossed, spec, "bfloat16")) == ["pair-angle-mismatch"]
    scaled = 1.0693 * rotate(x, phi, "interleaved", 64)
    found = dg.diagnose_apply(x, pos, rounded(scaled, "bfloat16"), spec, "bfloat16")
    assert codes(found) == ["attention-factor"] and "1.069" in found[0].message


def test_rotary_dim_confusions():
    spec = RopeSpec(128, 32, 1e4, "half")
    x, pos, theta = setup(spec, LEFT_PADDED, seed=5)
    whole = rotate(x, pos[..., None] * rr.inv_freq(128, 1e4), "half", 128)
    found = dg.diagnose_apply(x, pos, whole, spec, "float32")
    assert codes(found) == ["rotary-dim-mismatch"] and "whole head" in found[0].message
    exponent = rotate(x, pos[..., None] * 1e4 ** (-2.0 * np.arange(16) / 128), "half", 32)
    found = dg.diagnose_apply(x, pos, exponent, spec, "float32")
    assert codes(found) == ["rotary-dim-mismatch"] and "head_dim 128" in found[0].message


def test_linear_interpolation_is_a_scaling_mismatch():
    x, pos, theta = setup(SPEC, LEFT_PADDED, seed=6)
    out = rotate(x, pos[..., None] * theta / 4.0, "half", 128)
    found = dg.diagnose_apply(x, pos, out, SPEC, "float32")
    assert codes(found) == ["scaling-mismatch"] and "divided by 4" in found[0].message


def test_positions_of_row_zero_for_every_row():
    x, pos, theta = setup(SPEC, LEFT_PADDED + 5, seed=7)
    out = rotate(x, np.broadcast_to(pos[:1], pos.shape)[..., None] * theta, "half", 128)
    found = dg.diagnose_apply(x, pos, out, SPEC, "float32")
    assert codes(found) == ["positions-ignored"] and "row 0" in found[0].message


def test_two_bugs_at_once_are_not_guessed():
    x, pos, theta = setup(SPEC, LEFT_PADDED, seed=8)
    out = rotate(x, -(pos + 1)[..., None] * rr.inv_freq(128, 1e4), "interleaved", 128)
    assert dg.diagnose_apply(x, pos, out, SPEC, "float32") == []


def test_noise_is_not_explained():
    x, pos, theta = setup(SPEC, LEFT_PADDED, seed=9)
    ref = rotate(x, pos[..., None] * theta, "half", 128)
    noisy = ref * (1 + 1e-3 * np.random.default_rng(0).standard_normal(ref.shape))
    assert dg.diagnose_apply(x, pos, noisy, SPEC, "float32") == []


def test_non_finite_elements_are_ignored():
    x, pos, theta = setup(SPEC, LEFT_PADDED, seed=10)
    out = rotate(x, (pos + 1)[..., None] * theta, "half", 128)
    out[0, 3] = np.nan
    out[1, :, :, 5] = np.inf
    assert codes(dg.diagnose_apply(x, pos, out, SPEC, "float32")) == ["position-offset"]
    assert dg.diagnose_apply(x, pos, np.full_like(out, np.nan), SPEC, "float32") == []
    x_nan = x.copy()
    x_nan[0, 0, 0, 0] = np.nan
    assert codes(dg.diagnose_apply(x_nan, pos, out, SPEC, "float32")) == ["position-offset"]


def test_degenerate_inputs():
    spec = RopeSpec(2, 2, 1e4, "half")
    x = np.ones((1, 1, 1, 2))
    assert dg.diagnose_apply(x, np.array([[0]]), x, spec, "float32") == []
    assert dg.diagnose_apply(np.zeros((1, 3, 1, 2)), np.array([[1, 2, 3]]), np.zeros((1, 3, 1, 2)), spec,
                             "float32") == []
    # one pair: layouts coincide; a reversed rotation is still found
    x = rng_x((1, 4, 1, 2))
    pos = np.array([[1, 2, 3, 4]])
    out = rotate(x, -pos[..., None] * rr.inv_freq(2, 1e4), "half", 2)
    assert codes(dg.diagnose_apply(x, pos, out, spec, "float32")) == ["rotation-reversed"]
    # wrong shapes: nothing to say, no exception
    assert dg.diagnose_apply(x, pos, out[:, :2], spec, "float32") == []
    assert dg.diagnose_apply(x, pos[:, :2], out, spec, "float32") == []


def test_decode_step_with_one_position():
    x, pos, theta = setup(SPEC, np.array([[8191]]), seed=11)
    out = rotate(x, (pos + 1)[..., None] * theta, "half", 128)
    assert codes(dg.diagnose_apply(x, pos, out, SPEC, "float32")) == ["position-offset"]
    out = rotate(x, np.zeros((1, 1, 64)), "half", 128)
    assert codes(dg.diagnose_apply(x, pos, out, SPEC, "float32")) == ["positions-ignored"]


@given(
    layout=st.sampled_from(["half", "interleaved"]),
    half_r=st.integers(1, 16),
    extra=st.integers(0, 3),
    seq=st.integers(1, 5),
    batch=st.integers(1, 2),
    start=st.integers(0, 2**24),
    base=st.sampled_from([1e4, 5e5, 1e6]),
    garbage=st.booleans(),
)
def test_never_raises_and_correct_outputs_stay_undiagnosed(layout, half_r, extra, seq, batch, start, base, garbage):
    r = 2 * half_r
    d = r + 2 * extra
    spec = RopeSpec(d, r, base, layout)
    pos = start + np.arange(batch * seq).reshape(batch, seq)
    x, pos, theta = setup(spec, pos, seed=half_r)
    if garbage:
        out = np.random.default_rng(seq).standard_normal(x.shape)
        out[..., 0] = np.nan
        codes(dg.diagnose_apply(x, pos, out, spec, "bfloat16"))
    else:
        out = rotate(x, float32_angles(pos, theta), layout, r)
        assert dg.diagnose_apply(x, pos, out, spec, "float32") == []


def test_round_to_matches_torch():
    torch = pytest.importorskip("torch")
    v = np.concatenate([np.random.default_rng(0).standard_normal(2000) * 1e3,
                        np.arange(4080, 4112), [1 + 2**-8, 1 + 3 * 2**-8, 70000.0, -0.0]])
    for name in ("bfloat16", "float16", "float32"):
        want = torch.from_numpy(v).to(getattr(torch, name)).to(torch.float64).numpy()
        np.testing.assert_array_equal(dg.round_to(v, name), want)


def test_recover_effective_frequency_and_base():
    x, pos, _ = setup(SPEC, np.arange(12)[None], seed=12)
    true = rr.inv_freq(128, 7e4)
    out = rotate(x, pos[..., None] * true, "half", 128)
    eff = dg.recover_effective_frequency(x, pos, out, layout="half", rotary_dim=128,
                                         prior=rr.inv_freq(128, 5e5))
    assert eff.reliable.all() and eff.min_abs_position == 1
    np.testing.assert_allclose(eff.theta, true, rtol=1e-9)
    assert dg.fit_base(eff, 128) == pytest.approx(7e4, rel=1e-9)
    i, ratio = dg.frequency_departure(eff, rr.inv_freq(128, 5e5))
    assert i == 1 and ratio == pytest.approx(true[1] / rr.inv_freq(128, 5e5)[1])
    # One large position: only the slow pairs are unambiguous.
    x1, p1, _ = setup(SPEC, np.array([[4095]]), seed=13)
    eff1 = dg.recover_effective_frequency(x1, p1, rotate(x1, p1[..., None] * true, "half", 128),
                                          layout="half", rotary_dim=128, prior=true)
    assert not eff1.reliable[0] and eff1.reliable[-1]
    np.testing.assert_allclose(eff1.theta[eff1.reliable], true[eff1.reliable], rtol=1e-9)


def test_recover_effective_positions():
    x, pos, theta = setup(SPEC, LEFT_PADDED, seed=14)
    out = rotate(x, (pos + 1234)[..., None] * theta, "half", 128)
    est = dg.recover_effective_positions(x, pos, out, layout="half", rotary_dim=128, theta=theta)
    np.testing.assert_allclose(est, pos + 1234, atol=1e-6)


# ------------------------------------------------------------------------------------------
# rope.cache and rope.frequencies


def cache_output(phi, scale=1.0):
    return scale * np.cos(phi), scale * np.sin(phi)


def test_cache_diagnosis():
    spec = RopeSpec(128, 32, 5e5, "half")
    pos = LEFT_PADDED
    m = pos[..., None].astype(float)
    theta = rr.inv_freq(32, 5e5)
    assert dg.diagnose_cache(pos, cache_output(float32_angles(pos, theta)), spec, "float32") == []
    # head_dim = 2 rotary_dim: base**(-2i/d) is base**(-i/r); the message says both are possible.
    same = dg.diagnose_cache(pos, cache_output(m * 5e5 ** (-np.arange(16) / 32)), RopeSpec(64, 32, 5e5, "half"),
                             "float32")
    assert codes(same) == ["frequency-exponent"] and "fits rotary-dim-mismatch equally well" in same[0].message
    bugs = {
        "rotation-reversed": cache_output(-m * theta),
        "position-offset": cache_output((m - 1) * theta),
        "wrong-base": cache_output(m * rr.inv_freq(32, 1e4)),
        "frequency-exponent": cache_output(m * 5e5 ** (-np.arange(16) / 32)),
        "rotary-dim-mismatch": cache_output(m * 5e5 ** (-2.0 * np.arange(16) / 128)),
        "attention-factor": cache_output(m * theta, 1.2079),
        "scaling-mismatch": cache_output(m * theta / 8),
        "angle-precision": cache_output(rounded(rounded(m, "bfloat16") * rounded(theta, "bfloat16"), "bfloat16")),
    }
    for code, out in bugs.items():
        assert codes(dg.diagnose_cache(pos, out, spec, "float32")) == [code], code
    # The runner's stacked form [2, b, s, r/2] works the same.
    stacked = np.stack(bugs["position-offset"])
    assert codes(dg.diagnose_cache(pos, stacked, spec, "float32")) == ["position-offset"]


def test_frequencies_diagnosis():
    spec = RopeSpec(128, 32, 5e5, "half")
    theta = rr.inv_freq(32, 5e5)
    f32 = dg.round_to(theta, "float32")
    assert dg.diagnose_frequencies((f32, 1.0), spec, "float32") == []
    bugs = {
        "frequency-exponent": 5e5 ** (-np.arange(16) / 32),
        "wrong-base": rr.inv_freq(32, 1e4),
        "rotary-dim-mismatch": 5e5 ** (-2.0 * np.arange(16) / 128),
        "scaling-mismatch": theta / 2,
        "angle-precision": dg.round_to(theta, "bfloat16"),
    }
    for code, inv in bugs.items():
        assert codes(dg.diagnose_frequencies((inv, 1.0), spec, "float32")) == [code], code
    found = dg.diagnose_frequencies(np.concatenate([f32, [1.2079]]), spec, "float32")
    assert codes(found) == ["attention-factor"] and "1.2079" in found[0].message
    assert codes(dg.diagnose_frequencies((bugs["wrong-base"], 2.0), spec, "float32")) == [
        "wrong-base", "attention-factor"]


def test_each_protocol_explains_through_its_diagnose_hook():
    from support import diagnose

    x, pos, theta = setup(SPEC, LEFT_PADDED, seed=15)
    out = rotate(x, (pos + 1)[..., None] * theta, "half", 128)
    params = {"head_dim": 128, "rotary_dim": 128, "base": 5e5, "layout": "half", "scaling": None, "seq_len": 10}
    case = GoldenCase(id="rope.apply/t/x", protocol="rope.apply", group="t", params=params, comment="", flags=[],
                      arrays={"x": x, "positions": pos, "expected": rotate(x, pos[..., None] * theta, "half", 128)})
    assert codes(diagnose(case, SPEC, {"x": x, "positions": pos}, out, "float32")) == ["position-offset"]
    assert codes(diagnose(case, SPEC, {"x": x, "positions": pos}, out, "torch.float32")) == ["position-offset"]
    cache_case = GoldenCase(id="rope.cache/t/x", protocol="rope.cache", group="t", params=params, comment="",
                            flags=[], arrays={"positions": pos})
    assert codes(diagnose(cache_case, SPEC, {"positions": pos},
                          cache_output(-pos[..., None] * theta), "float32")) == ["rotation-reversed"]
    # Odd data defeats the analysis quietly: an explanation is never worth stopping the run.
    assert diagnose(case, SPEC, {"x": x, "positions": pos}, "not an array", "float32") == []


def test_constant_scale_is_found_from_pair_norms_where_angles_are_lost():
    """Near 2**24 float32 angles are off by radians, but pair norms still show a scale."""
    x, pos, theta = setup(SPEC, np.array([[2**24 - 2, 2**24 - 1, 2**24, 2**24 + 1]]), seed=16)
    out = 1.2079 * rotate(x, float32_angles(pos, theta), "half", 128)
    found = dg.diagnose_apply(x, pos, out, SPEC, "float32")
    assert codes(found) == ["attention-factor"] and "1.208" in found[0].message
    assert dg.diagnose_apply(x, pos, out / 1.2079, SPEC, "float32") == []


def test_low_precision_angles_without_an_exact_emulation():
    """Angles with random relative errors of bfloat16 size (not one of the emulated recipes)."""
    pos = np.stack([np.arange(100, 4100, 250), np.arange(300, 4300, 250)])
    x, pos, theta = setup(SPEC, pos, seed=17)
    phi = pos[..., None] * theta
    jitter = np.random.default_rng(1).uniform(-2.0**-9, 2.0**-9, phi.shape)
    found = dg.diagnose_apply(x, pos, rotate(x, phi * (1 + jitter), "half", 128), SPEC, "float32")
    assert codes(found) == ["angle-precision"] and "error grows with position" in found[0].message
    # A systematic relative error of the same size is a frequency change, not rounding.
    found = dg.diagnose_apply(x, pos, rotate(x, phi * (1 + 2.0**-9), "half", 128), SPEC, "float32")
    assert codes(found) != ["angle-precision"]
