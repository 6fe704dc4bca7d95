"""The "cpu" (Numba) and "numpy" backends agree (hypothesis over shapes, layouts, positions).

Documented bound (reference/rope/ACCURACY.md): in fast mode cos/sin differ by at most 2 ulp
(each is within 1 ulp of the exact value), apply outputs by at most 8 ulp of their pair's input
norm (each within the proven 4); in practice the two are bitwise identical nearly always. In
golden mode they are bitwise identical always (both correctly rounded): test_rope_golden.py.
"""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import reference.rope as R

COS_SIN_ULPS = 2.0
APPLY_PAIR_ULPS = 8.0

positions_values = st.one_of(
    st.integers(-(2**24), 2**24),
    st.integers(-(2**31), 2**31),
    st.integers(-(2**53), 2**53),
    st.sampled_from([0, 1, -1, 4095, 8191, 131071, 2**11, 2**16, 2**20, 2**24, 2**24 + 1, 2**53]),
)


@st.composite
def rope_case(draw):
    heads = draw(st.integers(1, 3))
    head_dim = 2 * draw(st.integers(1, 40))
    rotary_dim = draw(st.one_of(st.none(), st.integers(1, head_dim // 2).map(lambda k: 2 * k)))
    batch = draw(st.integers(0, 2))
    seq = draw(st.integers(1, 5))
    pos = np.array(
        draw(st.lists(positions_values, min_size=batch * seq, max_size=batch * seq)),
        dtype=np.int64,
    ).reshape(batch, seq)
    seed = draw(st.integers(0, 2**32 - 1))
    x = np.random.default_rng(seed).standard_normal((batch, seq, heads, head_dim))
    base = draw(st.sampled_from([10000.0, 500000.0, 1e6, 12345.678, 1.0, 2.0**64]))
    layout = draw(st.sampled_from(["half", "interleaved"]))
    return x, pos, rotary_dim, base, layout


def _pair_norm(x, r, layout):
    first, second = R.pair_indices(r, layout)
    norm = np.abs(x).copy()
    pn = np.hypot(x[..., first], x[..., second])
    norm[..., first] = pn
    norm[..., second] = pn
    return norm


@given(rope_case())
def test_cpu_and_numpy_apply_agree(case):
    x, pos, rotary_dim, base, layout = case
    kw = dict(rotary_dim=rotary_dim, base=base, layout=layout)
    a = R.apply(x, pos, backend="cpu", **kw)
    b = R.apply(x, pos, backend="numpy", **kw)
    r = x.shape[3] if rotary_dim is None else rotary_dim
    bound = APPLY_PAIR_ULPS * np.spacing(_pair_norm(x, r, layout))
    assert (np.abs(a - b) <= bound).all()
    assert np.array_equal(a[..., r:], x[..., r:]) and np.array_equal(b[..., r:], x[..., r:])


@given(
    st.lists(positions_values, min_size=1, max_size=12),
    st.integers(1, 128).map(lambda k: 2 * k),
    st.floats(1.0, 1e9),
)
def test_cpu_and_numpy_cos_sin_agree(pos, rotary_dim, base):
    pos = np.array(pos, dtype=np.int64)
    c1, s1 = R.cos_sin(pos, rotary_dim, base, backend="cpu")
    c2, s2 = R.cos_sin(pos, rotary_dim, base, backend="numpy")
    for u, v in ((c1, c2), (s1, s2)):
        ulp = np.spacing(np.maximum(np.abs(u), np.abs(v)))
        assert (np.abs(u - v) <= COS_SIN_ULPS * ulp).all()
