"""The one-pass cpu rotation (reference/numerics/stream_kernels.py) used by phase.rotate_streams (2-D
RoPE, M-RoPE) and phase.scaled_rotate (Gaussian RoPE, xPos, scaled RoPE): bit for bit the numpy
arithmetic it replaced -- (a c - b s) f and (a s + b c) f on the cpu backend's fast cos/sin --
with the tail copied (or scaled), CLS tokens untouched and the input never written."""

from __future__ import annotations

import numpy as np
import pytest

from reference import mrope, rope, rope2d
from reference.numerics import phase
from reference.numerics.layouts import pair_indices

RNG = np.random.default_rng(2026)


def _x(shape):
    x = RNG.standard_normal(shape) * 10.0 ** RNG.integers(-300, 300, size=shape)
    x.flat[0], x.flat[1], x.flat[-1] = np.nan, -0.0, -np.inf
    return x


def _numpy_streams(x, streams, stream_of_pair, entry_of_pair, table, layout, first_token=0):
    """The former numpy path of rotate_streams, on the cpu backend's cos/sin."""
    out = x.copy()
    first, second = pair_indices(2 * len(stream_of_pair), layout)
    cs = [phase._cos_sin(np.ascontiguousarray(s), table, "cpu", "fast") for s in streams]
    cos = np.stack([cs[s][0][..., e] for s, e in zip(stream_of_pair, entry_of_pair)], axis=-1)[:, first_token:, None]
    sin = np.stack([cs[s][1][..., e] for s, e in zip(stream_of_pair, entry_of_pair)], axis=-1)[:, first_token:, None]
    a, b = out[:, first_token:][..., first].copy(), out[:, first_token:][..., second].copy()
    out[:, first_token:, :, first] = a * cos - b * sin
    out[:, first_token:, :, second] = a * sin + b * cos
    return out


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_rope2d_and_mrope_fast_are_the_numpy_arithmetic_bit_for_bit(layout):
    x = _x((2, 7, 3, 16))
    keep = x.copy()
    coords = RNG.integers(-2**40, 2**40, size=(2, 7, 2))
    coords[0, :3] = 5  # repeated positions share a table row
    for cls in (0, 2, 7):
        got = rope2d.apply(x, coords, layout=layout, cls_tokens=cls)
        want = _numpy_streams(x, np.moveaxis(coords, -1, 0), rope2d.axes_of_pairs(16), np.arange(8) % 4,
                              phase.ladder(8, 100.0), layout, cls)
        assert got.tobytes() == want.tobytes()
    pos = RNG.integers(0, 3000, size=(3, 2, 7))
    pos[0] = 0  # a constant text stream
    got = mrope.apply(x, pos, mrope_section=[2, 2, 2], rotary_dim=12, layout=layout)
    want = _numpy_streams(x, pos, mrope.streams(12, [2, 2, 2]), np.arange(6), phase.ladder(12, 1e4), layout)
    assert got.tobytes() == want.tobytes()  # the tail past rotary_dim copied bit for bit
    assert np.array_equal(x, keep, equal_nan=True) and got is not x  # x only read


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_scaled_rotate_fast_is_rope_apply_times_the_rounded_factor(layout):
    x = _x((1, 5, 2, 12))
    m = np.array([[0, 3, -7, 2**33, 3]])
    table = phase.ladder(8, 1e4)
    first, second = pair_indices(8, layout)
    f = RNG.uniform(0.5, 2.0, size=(1, 5, 4))
    f[0, 4] = f[0, 1]
    tail = RNG.uniform(0.5, 2.0, size=(1, 5))
    tail[0, 4] = tail[0, 1]  # tokens 1 and 4 share a position, so their amplitudes

    def factor(prec, p, i):
        t = int(np.nonzero(m[0] == p)[0][0])
        return phase.mpmath.mpf(tail[0, t] if i is None else f[0, t, i])

    for per_pair, scale_tail in ((True, False), (True, True)):
        got = phase.scaled_rotate(x, m, table, factor, 8, layout, "cpu", "fast", scale_tail=scale_tail)
        want = rope.apply(x, m, rotary_dim=8, layout=layout)
        want[..., first] *= f[:, :, None, :]
        want[..., second] *= f[:, :, None, :]
        if scale_tail:
            want[..., 8:] *= tail[:, :, None, None]
        assert got.tobytes() == want.tobytes()
    one = phase.scaled_rotate(x, m, table, lambda prec, p, i: factor(prec, p, None), 8, layout, "cpu", "fast",
                              scale_tail=True, per_pair=False)
    want = rope.apply(x, m, rotary_dim=8, layout=layout) * tail[:, :, None, None]
    assert one.tobytes() == want.tobytes()


def test_scaled_rope_with_an_attention_factor_goes_through_the_kernel_unchanged():
    from reference.numerics.frequencies import scaled_table

    x = _x((2, 3, 2, 20))
    pos = RNG.integers(0, 500, size=(2, 3))
    sc = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
    table, factor = scaled_table(16, 1e4, sc, None)
    want = phase._rotate(x, pos, table, 16, "half", "cpu", "fast", shared=True)
    want[..., :16] *= phase.to_double(factor(phase.PREC_BITS))  # the tail is not scaled
    assert factor(64) != 1 and rope.apply(x, pos, rotary_dim=16, scaling=sc).tobytes() == want.tobytes()
