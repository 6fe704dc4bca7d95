"""reference.sinusoidal against its mpmath oracle, across backends, and its input checks."""

from __future__ import annotations

import numpy as np
import pytest

from reference import sinusoidal as S
from reference.golden.certify import nearest_double
from reference.sinusoidal import oracle

nearest = np.vectorize(nearest_double, otypes=[float])

VARIANTS = [
    dict(d_model=16, layout="interleaved", exponent="2i/d"),
    dict(d_model=15, layout="interleaved", exponent="2i/d"),
    dict(d_model=16, layout="concatenated", exponent="2i/(d-2)"),
    dict(d_model=13, layout="concatenated", exponent="2i/(d-2)", base=500000.0),
    dict(d_model=12, layout="interleaved", exponent="2i/(d-2)"),
    dict(d_model=16, layout="concatenated", exponent="2i/d", dims=2),
]
POSITIONS = np.array([0, 1, 2, -1, 7, 1000, 4095, 65535, 2**20, 2**24 + 1, 987011947, -(2**40) - 3, 2**53])


def _positions(kw):
    if kw.get("dims", 1) == 2:
        return np.stack([POSITIONS, POSITIONS[::-1]], axis=-1)
    return POSITIONS


def _exact(kw, pos):
    return oracle.table_exact(pos, kw["d_model"], kw["layout"], kw["exponent"], kw.get("base", 10000.0),
                              kw.get("dims", 1))


@pytest.mark.parametrize("kw", VARIANTS, ids=lambda kw: "-".join(str(v) for v in kw.values()))
def test_golden_is_the_nearest_double_on_every_backend_and_fast_within_1_5_ulp(kw):
    pos = _positions(kw)
    want = nearest(_exact(kw, pos))
    for backend in ("cpu", "numpy"):
        assert np.array_equal(S.table(pos, backend=backend, mode="golden", **kw), want), backend
        fast = S.table(pos, backend=backend, **kw)
        ulps = np.abs(fast - want) / np.spacing(np.maximum(np.abs(want), 2.0**-1022))
        assert ulps.max() <= 1.5, backend


def test_layouts_place_sin_and_cos_as_the_sources_do():
    w = 10000.0 ** (-2 * np.arange(4) / 8)
    inter = S.table([3], 8)[0]
    assert np.allclose(inter[0::2], np.sin(3 * w)) and np.allclose(inter[1::2], np.cos(3 * w))
    conc = S.table([3], 8, layout="concatenated")[0]
    assert np.allclose(conc[:4], np.sin(3 * w)) and np.allclose(conc[4:], np.cos(3 * w))
    t2t = S.table([3], 8, layout="concatenated", exponent="2i/(d-2)")[0]
    w2 = 10000.0 ** (-np.arange(4) / 3)  # tensor2tensor: timescales 1 .. 10000
    assert np.allclose(t2t, np.concatenate([np.sin(3 * w2), np.cos(3 * w2)]))
    odd = S.table([3], 9, layout="concatenated", exponent="2i/(d-2)")[0]
    assert odd[-1] == 0.0 and np.array_equal(odd[:8], t2t)  # fairseq's zero pad, same frequencies
    odd_i = S.table([3], 7)[0]
    w7 = 10000.0 ** (-2 * np.arange(4) / 7)
    assert np.allclose(odd_i[0::2], np.sin(3 * w7)) and np.allclose(odd_i[1::2], np.cos(3 * w7[:3]))


def test_2d_table_matches_mae():
    # MAE: meshgrid(grid_w, grid_h) -> coordinate 0 is the column w; [emb(w) | emb(h)].
    grid, d = 4, 16
    h, w = np.meshgrid(np.arange(grid), np.arange(grid), indexing="ij")
    coords = np.stack([w.reshape(-1), h.reshape(-1)], axis=-1)
    omega = 1.0 / 10000 ** (np.arange(d // 4) / (d / 4))

    def one(p):
        out = np.outer(p, omega)
        return np.concatenate([np.sin(out), np.cos(out)], axis=1)

    mae = np.concatenate([one(coords[:, 0]), one(coords[:, 1])], axis=1)
    ours = S.table(coords, d, layout="concatenated", dims=2)
    assert np.allclose(ours, mae, rtol=0, atol=1e-15)


@pytest.mark.parametrize("call, starts", [
    (lambda: S.table([1], 8, base=1.0), "base:"),
    (lambda: S.table([1], 8, base=float("nan")), "base:"),
    (lambda: S.table([1], 1), "d_model:"),
    (lambda: S.table([1], 3, exponent="2i/(d-2)"), "d_model:"),
    (lambda: S.table([[1, 2]], 6, dims=2), "d_model:"),
    (lambda: S.table([1, 2, 3], 8, dims=2), "positions:"),
    (lambda: S.table([1.5], 8), "positions:"),
    (lambda: S.table([2**53 + 1], 8), "positions:"),
    (lambda: S.table([1], 8, layout="half"), "layout:"),
    (lambda: S.table([1], 8, exponent="i/d"), "exponent:"),
    (lambda: S.table([1], 8, backend="tpu"), "backend"),
    (lambda: S.table([1], 8, mode="exact"), "mode"),
])
def test_bad_input_is_a_one_line_error_naming_the_argument(call, starts):
    with pytest.raises(ValueError) as err:
        call()
    assert str(err.value).startswith(starts) and "\n" not in str(err.value)


def test_a_broken_table_fails_the_identities():
    """The identities can fail: with the reference's sine replaced by a slightly wrong one."""
    from reference import identities

    identities.load_all()
    checks = {i.id: i for i in identities.REGISTRY.values() if i.family == "sinusoidal"}
    real = S.table

    def broken(positions, d_model, **kw):
        out = real(positions, d_model, **kw)
        return out * (1 + 1e-9)

    try:
        S.table = broken
        failing = [name for name in ("sinusoidal.unit-pairs", "sinusoidal.shift-is-rotation")
                   if checks[name].check() > checks[name].bound]
    finally:
        S.table = real
    assert failing == ["sinusoidal.unit-pairs", "sinusoidal.shift-is-rotation"]
