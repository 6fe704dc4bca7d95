"""RoPE's angle budget admits theta_i built as exp of a rounded exponent (docs/tolerance.md, section 3):
eps_angle(i) = u (EXPONENT_ROUNDINGS ln(base) e_i + ANGLE_ROUNDINGS), with the exponent
x_i = -ln(base) e_i rounded up to three times (MLX's ``mx.fast.rope``; diffusers' sinusoids), where the
budget once modelled pow's single rounding of 2i/r and MLX's fused kernel failed it by up to 1.18x."""

import math

import numpy as np
import pytest

from conformance import run_conformance
from conformance.core import rotation_budgets as B, sinusoid_budgets
from tests.support import ROOT

F32 = np.float32
U32 = 2.0**-24
BASES = (1e4, 1e5, 2e5, 5e5, 1e6, 3e6, 1e8)
ROTARY_DIMS = (64, 80, 96, 128, 256)


def _mlx_order(base, h):
    """MLX's kernel (mlx/backend/cpu/rope.cpp, mlx/fast.cpp): exp(-i * fl(fl(ln base) / h)), its exp
    computed as 2**fl(x log2(e)) (one more rounding of the exponent)."""
    x = -np.arange(h, dtype=F32) * (F32(math.log(base)) / F32(h))
    return np.exp2(x * F32(math.log2(math.e)))


def _diffusers_order(base, h):
    """diffusers' get_timestep_embedding: exp(fl(fl(-ln base) * i) / h)."""
    return np.exp((F32(-math.log(base)) * np.arange(h, dtype=F32)) / F32(h))


def _exp2_order(base, h):
    """exp2(-i * fl(fl(log2 base) / h)) (MLX's Metal kernel builds theta from log2(base))."""
    return np.exp2(-np.arange(h, dtype=F32) * (F32(math.log2(base)) / F32(h)))


def _one_rounding_bound(rotary_dim, base):
    """The budget's former eps_angle: u (ln(base) e_i + 5), pow's single rounding of 2i/r."""
    return U32 * (math.log(base) * B.exponents(rotary_dim) + B.ANGLE_ROUNDINGS)


def _worst_shares(construction):
    """max over bases, dims and pairs of |theta_hat - theta| / theta over (new eps_angle, old one)."""
    new = old = 0.0
    for base in BASES:
        for r in ROTARY_DIMS:
            h = r // 2
            theta = base ** (-np.arange(h) / h)  # float64: about 1e-16 relative, exact at budget scale
            rel = np.abs(construction(base, h).astype(np.float64) - theta) / theta
            new = max(new, float(np.max(rel / B.angle_relative_error(r, base, "standard"))))
            old = max(old, float(np.max(rel / _one_rounding_bound(r, base))))
    return new, old


def test_exponent_roundings_are_one_constant_for_rope_and_sinusoids():
    assert sinusoid_budgets.EXPONENT_ROUNDINGS is B.EXPONENT_ROUNDINGS
    assert B.EXPONENT_ROUNDINGS == 3.0
    r, base = 96, 5e5
    np.testing.assert_allclose(B.angle_relative_error(r, base, "standard"),
                               U32 * (3 * math.log(base) * B.exponents(r) + 5), rtol=1e-15)
    inv = base ** -B.exponents(r)
    np.testing.assert_allclose(B.frequency_budget(inv, r, base, "float32", "standard"),
                               inv * (U32 + U32 * (3 * math.log(base) * B.exponents(r) + 3)) + 2.0**-149,
                               rtol=1e-15)


@pytest.mark.parametrize("construction", [_mlx_order, _diffusers_order, _exp2_order])
def test_exp_of_a_rounded_exponent_is_within_the_angle_budget(construction):
    new, _ = _worst_shares(construction)
    assert new < 0.7, new  # measured 0.39-0.59 (docs/tolerance.md, section 3)


def test_the_one_rounding_bound_did_not_admit_them():
    """MLX's order and diffusers' exceed u (ln(base) e_i + 5) at large bases (1.40x and 1.30x)."""
    assert _worst_shares(_mlx_order)[1] > 1.2
    assert _worst_shares(_diffusers_order)[1] > 1.2


def test_mlx_exp_theta_is_within_the_budget():
    """The frequencies mx.fast.rope uses (bit for bit: mx.exp of -i * fl(fl(ln base) / h)), against
    the frequency budget (no product, no position) and the old one-rounding bound."""
    mx = pytest.importorskip("mlx.core")
    worst_new = worst_old = 0.0
    for base in BASES:
        for r in ROTARY_DIMS:
            h = r // 2
            x = -np.arange(h, dtype=F32) * (F32(math.log(base)) / F32(h))
            got = np.array(mx.exp(mx.array(x))).astype(np.float64)
            theta = base ** (-np.arange(h) / h)
            err = np.abs(got - theta)
            worst_new = max(worst_new, float(np.max(err / B.frequency_budget(theta, r, base, "float32", "standard"))))
            old = theta * (U32 + U32 * (math.log(base) * B.exponents(r) + B.FREQ_ROUNDINGS))
            worst_old = max(worst_old, float(np.max(err / old)))
    assert worst_new < 1.0 < worst_old, (worst_new, worst_old)


@pytest.mark.parametrize("seed", [2809685545, 3])
def test_mlx_fast_rope_passes_rope_apply_in_float32(seed):
    """examples/rope/mlx_rope.py:apply_fast (mx.fast.rope) failed 5 cases by 1.02-1.15 at seed
    2809685545 (llama3-d128 at base 5e5: decode-131071, around-2p24; fresh decode batches)."""
    pytest.importorskip("mlx.core")
    report = run_conformance(f"{ROOT / 'examples' / 'rope' / 'mlx_rope.py'}:apply_fast", "rope.apply",
                             framework="mlx", dtypes=("float32",), seed=seed, identities=False)
    graded = [c for c in report.cases if c.verdict != "skip"]
    assert len(graded) > 50
    assert all(c.verdict in ("pass", "acceptable") for c in graded), [
        (c.id, c.verdict, c.budget_ratio) for c in graded if c.verdict not in ("pass", "acceptable")]
    assert any(c.id == "rope.apply/llama3-d128/around-2p24" for c in graded)
    assert max(c.budget_ratio for c in graded) < 0.8  # measured 0.63-0.69 over 11 seeds
