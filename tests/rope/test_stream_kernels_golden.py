"""Golden mode's quick phase for the rotation families (issue 31; reference/numerics/stream_kernels.py
rotate_golden, phase.rotate_streams / phase.scaled_rotate on the cpu backend): every output it
certifies is the nearest double, the ones it cannot certify reach the mpmath path, and the result is
bit for bit the value-by-value mpmath oracle (rotate_streams_mpmath / scaled_rotate_mpmath)."""

from __future__ import annotations

import numpy as np
import pytest

from reference.numerics import phase, stream_kernels
from reference.numerics.layouts import pair_indices

RNG = np.random.default_rng(31)


def stress_x(rng, shape):
    """Normal draws over 120 binades, with exact zeros, the ends of the double-double range
    (2^-800, 2^990) and values past them (subnormal, 2^1000) planted in."""
    x = rng.standard_normal(shape) * 2.0 ** rng.integers(-60, 60, size=shape)
    flat = x.reshape(-1)
    specials = [0.0, -0.0, 2.0**-800, -(2.0**-801), 2.0**990, 3 * 2.0**-1074, 2.0**-1022, -(2.0**1000), 1.0,
                1.0 + 2.0**-52]
    picks = rng.choice(flat.size, size=min(flat.size, len(specials)), replace=False)
    flat[picks] = specials[: picks.size]
    return x


def _factor(prec, m, i):
    """An amplitude spanning the exponent range: 3^(m/7) (1 + i/5)^-40 (never a double exactly)."""
    import mpmath

    with mpmath.workprec(prec):
        base = mpmath.mpf(3) ** (mpmath.mpf(int(m)) / 7)
        return base if i is None else base * (1 + mpmath.mpf(int(i)) / 5) ** -40


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_rotate_streams_golden_is_the_mpmath_oracle_bit_for_bit(layout):
    x = stress_x(RNG, (1, 9, 2, 12))
    streams = RNG.integers(-3000, 3000, size=(2, 1, 9))
    streams[0, 0, 2], streams[1, 0, 3], streams[0, 0, 4] = 0, 2**40, -(2**21) - 1  # m = 0, the exact path
    table = phase.ladder(8, 100.0)
    stream_of_pair, entry_of_pair = np.array([0, 1, 0, 1, 1]), np.array([0, 1, 2, 3, 0])
    got = phase.rotate_streams(x, streams, stream_of_pair, entry_of_pair, table, layout, "cpu", "golden",
                               first_token=1)
    want = phase.rotate_streams_mpmath(x.copy(), streams, stream_of_pair, entry_of_pair, table, layout,
                                       first_token=1)
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("per_pair", [True, False])
def test_scaled_rotate_golden_is_the_mpmath_oracle_bit_for_bit(per_pair):
    # amplitudes from 3^-1500 (every result +0.0 or subnormal) to 3^600 (results past 2^1000)
    x = stress_x(RNG, (1, 10, 2, 12))
    x[0, 1, 0, 3], x[0, 2, 1, 0] = np.nan, -np.inf  # non-finite inputs propagate as the oracle's
    m = np.array([[0, 3, -7, 2**33, -1500, -4650, -4700, 600, 4500, 2**40]])
    table = phase.ladder(8, 1e4)
    factor = _factor if per_pair else (lambda prec, p, i: _factor(prec, p, None))
    got = phase.scaled_rotate(x.copy(), m, table, factor, 8, "half", "cpu", "golden", scale_tail=True,
                              per_pair=per_pair)
    want = phase.scaled_rotate_mpmath(x.copy(), m, table, factor, 8, "half", "cpu", scale_tail=True)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    keep = ~np.isnan(want)
    assert got[keep].tobytes() == want[keep].tobytes()


def test_certified_outputs_are_correct_under_an_inflated_bound_and_the_rest_are_flagged():
    # frel = 2^-56 makes many roundings uncertain: the kernel must flag them, and every output it
    # still certifies must be the oracle's (the test is honest, not only the common case)
    x = RNG.standard_normal((1, 6, 2, 16))
    m = RNG.integers(1, 2000, size=(1, 6))
    table = phase.ladder(16, 1e4)
    fac = phase.dd_factors(_factor, m.reshape(-1), 8)
    out, flags = stream_kernels.rotate_golden(x, m[None], np.zeros(8, dtype=np.int64), np.arange(8), table.limbs,
                                              "interleaved", factors=fac, frel=2.0**-56)
    want = phase.scaled_rotate_mpmath(x.copy(), m, table, _factor, 16, "interleaved", "cpu")
    assert 0 < flags.sum() < flags.size
    ok = flags == 0
    assert out[ok].tobytes() == want[ok].tobytes()


def test_every_uncertain_output_reaches_the_mpmath_path(monkeypatch):
    # a kernel that certifies nothing (and writes garbage): phase must settle every output itself
    real = stream_kernels.rotate_golden

    def nothing_certain(*args, **kwargs):
        out, flags = real(*args, **kwargs)
        out[...] = 12345.0
        flags[...] = 1
        return out, flags

    x = RNG.standard_normal((1, 3, 2, 10))
    m = np.array([[0, 5, 900]])
    table = phase.ladder(8, 1e4)
    want_s = phase.rotate_streams_mpmath(x.copy(), m[None], np.zeros(4, dtype=np.int64), np.arange(4), table, "half")
    want_f = phase.scaled_rotate_mpmath(x.copy(), m, table, _factor, 8, "half", "cpu", scale_tail=True)
    monkeypatch.setattr(stream_kernels, "rotate_golden", nothing_certain)
    got_s = phase.rotate_streams(x.copy(), m[None], np.zeros(4, dtype=np.int64), np.arange(4), table, "half", "cpu",
                                 "golden")
    got_f = phase.scaled_rotate(x.copy(), m, table, _factor, 8, "half", "cpu", "golden", scale_tail=True)
    # the tail past the rotated pairs is copied by the kernel (unscaled) and not flagged
    first, second = pair_indices(8, "half")
    cols = np.r_[first, second]
    assert got_s[..., cols].tobytes() == want_s[..., cols].tobytes()
    assert got_f.tobytes() == want_f.tobytes()


def test_dd_factor_represents_amplitudes_past_the_double_range():
    import mpmath

    for value in (mpmath.mpf(3) ** -5000, mpmath.mpf(2) ** 3000 * 3, mpmath.mpf("0.1"), mpmath.mpf(0)):
        fh, fl, fe, fd = phase.dd_factor(value)
        if value == 0:
            assert (fh, fl, fe, fd) == (0.0, 0.0, 0.0, 0.0)
            continue
        assert 1.0 <= fh <= 2.0 and fe == int(fe)
        with mpmath.workprec(300):
            rel = abs(mpmath.ldexp(mpmath.mpf(fh) + mpmath.mpf(fl), int(fe)) / value - 1)
        assert rel <= phase.DD_FACTOR_REL
        assert fd == phase.to_double(value)
