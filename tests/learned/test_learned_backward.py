"""The learned lookup's backward (reference/learned/backward.py, issue 15): grad_x = g and the
scatter-add of g into the table's rows, against central differences and exact rational sums
(golden correctly rounded, fast within the recursive-summation bound on the numpy and cpu
backends, which agree bit for bit), the identity, the mutants. The cuda backend is tested in
test_learned_cuda.py."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from reference import learned
from reference.identities import REGISTRY, run_identity
from reference.learned import backward

U = 2.0**-53


def _exact_table_grad(g, rows, n):
    """Exact sums as Fractions, [n][d]."""
    out = [[Fraction(0)] * g.shape[-1] for _ in range(n)]
    for t, r in enumerate(rows.reshape(-1)):
        for j, v in enumerate(g.reshape(-1, g.shape[-1])[t]):
            out[r][j] += Fraction(float(v))
    return out


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
@pytest.mark.parametrize("num_positions, variant, padding_idx", [(8, "absolute", None), (10, "roberta", 1)])
def test_golden_is_correctly_rounded_fast_within_bound(num_positions, variant, padding_idx, backend):
    rng = np.random.default_rng(41)
    low, high = learned.position_range(num_positions, variant, padding_idx)
    pos = rng.integers(low, high, (3, 12), endpoint=True)
    # cancellation: a row whose contributions nearly cancel, and a wide range of magnitudes
    g = rng.standard_normal((3, 12, 5)) * np.exp2(rng.integers(-40, 40, (3, 12, 5)))
    pos[0, :2] = low
    g[0, 1] = -g[0, 0] * (1 + 2.0**-50)
    rows = learned.rows(pos, num_positions, variant=variant, padding_idx=padding_idx)
    exact = _exact_table_grad(g, rows, num_positions)
    want = np.array([[float(v) for v in row] for row in exact])
    gx, gt = backward.lookup_vjp(g, pos, num_positions, variant=variant, padding_idx=padding_idx, mode="golden")
    assert np.array_equal(gx, g) and np.array_equal(gt, want)
    _, fast = backward.lookup_vjp(g, pos, num_positions, variant=variant, padding_idx=padding_idx, backend=backend)
    counts = np.bincount(rows.reshape(-1), minlength=num_positions)[:, None]
    abs_sum = np.zeros((num_positions, 5))
    np.add.at(abs_sum, rows.reshape(-1), np.abs(g.reshape(-1, 5)))
    # recursive summation of n_r terms: (n_r - 1) u sum |g| (gamma_{n-1}, with a 1.01 margin for 2nd order)
    assert np.all(np.abs(fast - want) <= np.maximum(counts - 1, 0) * U * abs_sum * 1.01)
    assert np.any(fast != want)  # the fast sum really rounds differently somewhere (the test can fail)
    if variant == "roberta":
        _, frozen = backward.lookup_vjp(g, pos, num_positions, variant=variant, padding_idx=padding_idx,
                                        freeze_padding=True, backend=backend)
        assert np.all(frozen[padding_idx] == 0.0) and np.any(fast[padding_idx] != 0.0)


def _scatter_cases():
    """(g, positions, num_positions, keywords): repeated rows with cancellation, RoBERTa padding
    (frozen or not), IEEE specials, a one-row table, and empty token and column sets."""
    rng = np.random.default_rng(45)
    g = rng.standard_normal((2, 30, 4)) * np.exp2(rng.integers(-60, 60, (2, 30, 4)))
    pos = rng.integers(0, 3, (2, 30))
    g[0, 1] = -g[0, 0] * (1 + 2.0**-45)
    pos[0, 1] = pos[0, 0]
    specials = np.array([[[np.inf, 1e308, -0.0], [-np.inf, 1e308, -0.0], [np.nan, -1e308, 0.0], [1.0, 1.0, -0.0]]])
    roberta = dict(variant="roberta", padding_idx=1)
    rpos = np.where(rng.random((2, 30)) < 0.3, -1, rng.integers(0, 5, (2, 30)))
    return [
        (g, pos, 5, {}),
        (g, rpos, 8, roberta),
        (g, rpos, 8, dict(roberta, freeze_padding=True)),
        (specials, np.array([[0, 0, 1, 0]]), 2, {}),
        (g[:1, :7], np.zeros((1, 7), np.int64), 1, {}),
        (np.zeros((0, 4, 3)), np.zeros((0, 4), np.int64), 3, {}),
        (np.zeros((2, 3, 0)), np.ones((2, 3), np.int64), 3, {}),
    ]


@pytest.mark.parametrize("case", range(len(_scatter_cases())))
def test_cpu_scatter_add_is_numpy_add_at_bit_for_bit(case):
    g, pos, n, kw = _scatter_cases()[case]
    gx_np, gt_np = backward.lookup_vjp(g, pos, n, backend="numpy", **kw)
    gx_cpu, gt_cpu = backward.lookup_vjp(g, pos, n, backend="cpu", **kw)
    assert gt_cpu.shape == (n, g.shape[2]) and gt_cpu.dtype == np.float64
    # the same additions in the same order: the same bits (NaN payloads and signed zeros included)
    assert gt_cpu.tobytes() == gt_np.tobytes() and gx_cpu.tobytes() == gx_np.tobytes()
    if kw.get("freeze_padding"):
        assert np.all(gt_cpu[1] == 0.0)


def test_golden_mode_is_the_same_on_every_backend():
    g, pos, n, kw = _scatter_cases()[1]
    want = backward.lookup_vjp(g, pos, n, mode="golden", **kw)[1]
    for be in ("numpy", "cpu", "cuda"):  # golden runs on the host: "cuda" needs no GPU here
        assert backward.lookup_vjp(g, pos, n, mode="golden", backend=be, **kw)[1].tobytes() == want.tobytes()


def test_cpu_kernel_never_writes_outside_the_table():
    from reference.learned import cpu_kernels

    with pytest.raises(ValueError, match="^positions: 2 rows outside the 3-row table") as info:
        cpu_kernels.scatter_add(np.ones((4, 2)), np.array([0, 3, -1, 2]), 3)
    assert "\n" not in str(info.value)


def test_central_differences():
    rng = np.random.default_rng(42)
    pos = np.array([[0, 1, 1, 3], [3, 3, 2, 0]])
    x, table = rng.standard_normal((2, 4, 3)), rng.standard_normal((5, 3))
    g = rng.standard_normal((2, 4, 3))
    gx, gt = backward.lookup_vjp(g, pos, 5, mode="golden")
    h = 0.125
    fd_table = np.empty(table.shape)
    for r, j in np.ndindex(table.shape):
        step = np.zeros(table.shape)
        step[r, j] = h
        diff = (learned.lookup(x, pos, table + step) - learned.lookup(x, pos, table - step)) / (2 * h)
        fd_table[r, j] = np.sum(g * diff)
    # each lookup rounds once (u |x + t|); the difference quotient errs by u (|x| + |t| + h) / h per
    # element (two sums and the rounded inputs), times sum |g| over the row's tokens
    tol = 4 * U * (np.max(np.abs(x)) + np.max(np.abs(table)) + h) / h * np.sum(np.abs(g))
    assert np.all(np.abs(fd_table - gt) <= tol)
    assert np.all(fd_table[4] == 0.0) and np.all(gt[4] == 0.0)  # row 4 is never read
    fd_x = np.empty(x.shape)
    for idx in np.ndindex(x.shape):
        step = np.zeros(x.shape)
        step[idx] = h
        fd_x[idx] = np.sum(g * (learned.lookup(x + step, pos, table) - learned.lookup(x - step, pos, table)) / (2 * h))
    assert np.all(np.abs(fd_x - gx) <= tol)


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="^g:"):
        backward.lookup_vjp(np.zeros((2, 3)), np.zeros((2, 3), np.int64), 4)
    with pytest.raises(ValueError, match="^positions:"):
        backward.lookup_vjp(np.zeros((1, 2, 3)), np.array([[0, 4]]), 4)
    with pytest.raises(ValueError, match="^num_positions:"):
        backward.lookup_vjp(np.zeros((1, 2, 3)), np.array([[0, 1]]), 0)
    with pytest.raises(ValueError, match="^mode:"):
        backward.lookup_vjp(np.zeros((1, 2, 3)), np.array([[0, 1]]), 4, mode="exact")
    for mode in ("fast", "golden"):
        for bad in ("gpu", None, "CPU"):
            with pytest.raises(ValueError, match="^backend: must be one of cpu, cuda, numpy; got") as info:
                backward.lookup_vjp(np.zeros((1, 2, 3)), np.array([[0, 1]]), 4, mode=mode, backend=bad)
            assert "\n" not in str(info.value)


def test_nonfinite_and_overflow():
    g = np.array([[[np.inf, 1e308], [1.0, 1e308], [np.nan, -1e308]]])
    _, gt = backward.lookup_vjp(g, np.array([[0, 0, 1]]), 2, mode="golden")
    assert gt[0, 0] == np.inf and gt[0, 1] == np.inf and np.isnan(gt[1, 0]) and gt[1, 1] == -1e308
    g = np.array([[[1e308], [1e308], [-1e308]]])  # fsum's partials overflow, the exact sum does not
    _, gt = backward.lookup_vjp(g, np.array([[0, 0, 0]]), 1, mode="golden")
    assert gt[0, 0] == 1e308


def test_mutants_are_far():
    rng = np.random.default_rng(43)
    pos = np.array([[0, 1, 1, 2, 2, 2]])
    g = rng.standard_normal((1, 6, 4))
    gx, gt = backward.lookup_vjp(g, pos, 4)
    muts = backward.mutants(g, pos, 4)
    assert set(muts) == {"backward-missing", "backward-scale", "backward-overwrite"}
    for code, items in muts.items():
        for _, (mx, mt) in items:
            assert np.linalg.norm(mx - gx) + np.linalg.norm(mt - gt) > 1e-3 * np.linalg.norm(gt), code


def test_backward_identity_holds_and_sees_a_sloppy_sum(monkeypatch):
    import reference.learned.identities  # noqa: F401

    result = run_identity(REGISTRY["learned.backward-scatter-add"])
    assert result["verdict"] == "holds" and result["residual"] == 0.0
    real = backward.lookup_vjp
    monkeypatch.setattr(backward, "lookup_vjp", lambda *a, mode="fast", **k: real(*a, mode="fast", **k))
    assert run_identity(REGISTRY["learned.backward-scatter-add"])["verdict"] == "failing"


def test_adjoint():
    """<grad_x, dx> + <grad_table, dT> = <g, dx + dT[row]>, fast mode, 32 tokens on 6 rows.

    Bound (32 + 4)u S, S = sum_t,j |g_tj| (|dx_tj| + |dT_row(t),j|): the fast scatter-add of n_r <= 32
    terms errs by (n_r - 1)u sum |g| (recursive summation), 31u S once dotted with dT; the lhs fsum adds
    2u S; the rhs rounds dx + dT[row] and the product (2u S) and fsums (u S)."""
    import math

    rng = np.random.default_rng(44)
    for num_positions, variant, padding_idx in ((512, "absolute", None), (514, "roberta", 1)):
        low, _ = learned.position_range(num_positions, variant, padding_idx)
        pos = rng.integers(low, low + 5, (2, 16), endpoint=True)
        g, dx = rng.standard_normal((2, 16, 8)), rng.standard_normal((2, 16, 8))
        dT = rng.standard_normal((num_positions, 8))
        gx, gt = backward.lookup_vjp(g, pos, num_positions, variant=variant, padding_idx=padding_idx)
        rows = learned.rows(pos, num_positions, variant=variant, padding_idx=padding_idx)
        lhs = math.fsum(np.concatenate([(gx * dx).ravel(), (gt * dT).ravel()]).tolist())
        rhs = math.fsum((g * (dx + dT[rows])).ravel().tolist())
        scale = float(np.sum(np.abs(g) * (np.abs(dx) + np.abs(dT[rows]))))
        assert abs(lhs - rhs) <= 36 * U * scale
        # a mean instead of a sum breaks it by far
        muts = backward.mutants(g, pos, num_positions, variant=variant, padding_idx=padding_idx)
        _, (_, mean) = muts["backward-scale"][0]
        wrong = math.fsum(np.concatenate([(gx * dx).ravel(), (mean * dT).ravel()]).tolist())
        assert abs(wrong - rhs) > 1e3 * 36 * U * scale
