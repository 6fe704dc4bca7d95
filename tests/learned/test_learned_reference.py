"""reference.learned: the lookup's semantics, its refusals (the length wall, one-line errors),
the backends agreeing bit for bit, the mpmath oracle, and the family's identities.

The CUDA backend is checked in test_learned_cuda.py (subprocesses: the simulator must be chosen
before numba.cuda is imported).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import reference.learned as L
from reference import identities
from reference.learned import oracle

HOST_BACKENDS = ("cpu", "numpy")
# (num_positions, variant, padding_idx) of BERT-base, GPT-2 and RoBERTa-base.
MODELS = ((512, "absolute", None), (1024, "absolute", None), (514, "roberta", 1))


def _table(n, d=2):
    """Row r holds [10 r, 10 r + 1, ...]: the row read is visible in the output."""
    return 10.0 * np.arange(n)[:, None] + np.arange(d)[None, :]


# --------------------------------------------------------------------------------------------
# Semantics


@pytest.mark.parametrize("backend", HOST_BACKENDS)
def test_absolute_lookup_adds_the_row_of_each_position(backend):
    x = np.array([[[0.5, -0.5], [1.0, 2.0], [0.0, 0.0]]])
    out = L.lookup(x, [[0, 3, 4]], _table(5), backend=backend)
    np.testing.assert_array_equal(out, [[[0.5, 0.5], [31.0, 33.0], [40.0, 41.0]]])
    assert out.dtype == np.float64 and out.shape == (1, 3, 2)


@pytest.mark.parametrize("backend", HOST_BACKENDS)
def test_roberta_rows_start_at_padding_idx_plus_one_and_padding_reads_padding_idx(backend):
    zero = np.zeros((2, 4, 2))
    pos = np.array([[0, 1, 2, 511], [-1, -1, 0, 1]])  # left padding marked -1
    out = L.lookup(zero, pos, _table(514), variant="roberta", padding_idx=1, backend=backend)
    rows = out[..., 0] / 10.0
    np.testing.assert_array_equal(rows, [[2, 3, 4, 513], [1, 1, 2, 3]])
    np.testing.assert_array_equal(L.rows(pos, 514, variant="roberta", padding_idx=1), rows)


def test_the_last_row_is_read_and_position_range_is_the_wall():
    for n, variant, pad in MODELS:
        low, high = L.position_range(n, variant, pad)
        assert high == (511 if variant == "roberta" else n - 1)
        assert low == (-1 if variant == "roberta" else 0)
        assert L.rows([[high]], n, variant=variant, padding_idx=pad)[0, 0] == n - 1


@pytest.mark.parametrize("backend", HOST_BACKENDS)
def test_inputs_of_any_real_dtype_are_converted_and_never_modified(backend):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    table = rng.standard_normal((6, 4)).astype(np.float16)
    pos = np.array([[0, 5, 1], [2, 2, 3]], dtype=np.int32)
    before = (x.copy(), table.copy(), pos.copy())
    out = L.lookup(x, pos, table, backend=backend)
    want = x.astype(np.float64) + table.astype(np.float64)[pos]
    np.testing.assert_array_equal(out, want)
    for a, b in zip((x, table, pos), before):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("backend", HOST_BACKENDS)
def test_nan_and_inf_propagate_and_empty_batches_work(backend):
    x = np.array([[[np.nan, np.inf], [-np.inf, 1.0]]])
    out = L.lookup(x, [[0, 1]], np.array([[1.0, -np.inf], [np.inf, 2.0]]), backend=backend)
    assert np.isnan(out[0, 0, 0]) and np.isnan(out[0, 0, 1]) and np.isnan(out[0, 1, 0])
    assert out[0, 1, 1] == 3.0
    assert L.lookup(np.zeros((0, 3, 2)), np.zeros((0, 3), np.int64), _table(4), backend=backend).shape == (0, 3, 2)


# --------------------------------------------------------------------------------------------
# Refusals


WALL = [
    (512, "absolute", None, 512),
    (512, "absolute", None, 513),
    (512, "absolute", None, 2**62),
    (512, "absolute", None, -1),
    (1024, "absolute", None, 1024),
    (1024, "absolute", None, 2047),
    (514, "roberta", 1, 512),
    (514, "roberta", 1, -2),
    (514, "roberta", 1, 10**6),
]


@pytest.mark.parametrize("backend", HOST_BACKENDS)
@pytest.mark.parametrize("n, variant, pad, bad", WALL)
def test_every_position_past_the_wall_is_refused_in_one_line(n, variant, pad, bad, backend):
    ok = L.position_range(n, variant, pad)[1]
    pos = np.array([[0, 1, ok], [ok, 2, bad]], dtype=np.int64)  # one bad token, in the last place
    with pytest.raises(ValueError) as info:
        L.lookup(np.zeros((2, 3, 2)), pos, _table(n), variant=variant, padding_idx=pad, backend=backend)
    msg = str(info.value)
    assert msg.startswith("positions:") and "\n" not in msg
    assert "length wall" in msg and str(bad) in msg and "[1, 2]" in msg
    with pytest.raises(ValueError, match="^positions:"):
        L.rows(pos, n, variant=variant, padding_idx=pad)


def test_unsigned_positions_past_int64_are_refused_not_wrapped():
    pos = np.array([[2**64 - 1]], dtype=np.uint64)
    with pytest.raises(ValueError, match="^positions: 18446744073709551615 .*length wall"):
        L.lookup(np.zeros((1, 1, 2)), pos, _table(4))


BAD_ARGUMENTS = [
    (dict(x=np.zeros((3, 2))), "x:"),
    (dict(x=np.zeros((1, 1, 2), dtype=complex)), "x:"),
    (dict(table=np.zeros((4, 3))), "table:"),
    (dict(table=np.zeros((0, 2))), "table:"),
    (dict(table=np.zeros(4)), "table:"),
    (dict(positions=np.zeros((1, 1))), "positions:"),
    (dict(positions=np.zeros((1, 1), dtype=bool)), "positions:"),
    (dict(positions=np.zeros((1, 2), dtype=np.int64)), "positions:"),
    (dict(variant="bert"), "variant:"),
    (dict(padding_idx=1), "padding_idx:"),
    (dict(variant="roberta"), "padding_idx:"),
    (dict(variant="roberta", padding_idx=4), "padding_idx:"),
    (dict(variant="roberta", padding_idx=True), "padding_idx:"),
    (dict(variant="roberta", padding_idx=1.0), "padding_idx:"),
    (dict(backend="tpu"), "backend:"),
]


@pytest.mark.parametrize("change, start", BAD_ARGUMENTS)
def test_bad_arguments_are_one_line_errors_naming_the_argument(change, start):
    args = dict(x=np.zeros((1, 1, 2)), positions=np.zeros((1, 1), dtype=np.int64), table=_table(4))
    args.update(change)
    x, pos, table = args.pop("x"), args.pop("positions"), args.pop("table")
    with pytest.raises(ValueError) as info:
        L.lookup(x, pos, table, **args)
    assert str(info.value).startswith(start) and "\n" not in str(info.value)


# --------------------------------------------------------------------------------------------
# Backends and oracle

values = st.one_of(
    st.floats(-1e300, 1e300, allow_nan=False),
    st.floats(-1e-300, 1e-300),
    st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.0**-1074, np.nan, np.inf, -np.inf]),
)


@st.composite
def lookup_case(draw):
    n, variant, pad = draw(st.sampled_from(MODELS + ((3, "roberta", 0), (1, "absolute", None))))
    b, s, d = draw(st.integers(0, 3)), draw(st.integers(1, 5)), draw(st.integers(1, 6))
    low, high = L.position_range(n, variant, pad)
    pos = np.array(draw(st.lists(st.integers(low, high), min_size=b * s, max_size=b * s)),
                   dtype=np.int64).reshape(b, s)
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((b, s, d)) * np.exp2(rng.integers(-60, 60, size=(b, s, d)))
    table = rng.standard_normal((n, d)) * np.exp2(rng.integers(-60, 60, size=(n, d)))
    specials = draw(st.lists(values, min_size=2, max_size=2))
    if x.size:
        x.reshape(-1)[0] = specials[0]
    table.reshape(-1)[-1] = specials[1]
    return x, pos, table, variant, pad


@given(lookup_case())
def test_cpu_and_numpy_backends_agree_bit_for_bit(case):
    x, pos, table, variant, pad = case
    a = L.lookup(x, pos, table, variant=variant, padding_idx=pad, backend="cpu")
    b = L.lookup(x, pos, table, variant=variant, padding_idx=pad, backend="numpy")
    assert np.array_equal(a.view(np.int64), b.view(np.int64))
    with np.errstate(invalid="ignore"):
        want = x + table[L.rows(pos, table.shape[0], variant=variant, padding_idx=pad)]
    assert np.array_equal(a.view(np.int64), want.view(np.int64))


def test_oracle_rounds_to_the_reference_and_refuses_the_wall():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 4, 3)) * np.exp2(rng.integers(-40, 40, size=(2, 4, 3)))
    table = rng.standard_normal((514, 3))
    pos = np.array([[-1, 0, 5, 511], [3, -1, 2, 100]])
    exact = oracle.lookup_exact(x, pos, table, "roberta", 1)
    got = L.lookup(x, pos, table, variant="roberta", padding_idx=1)
    np.testing.assert_array_equal(oracle.rounded(exact), got)
    inexact = sum(1 for e, g in zip(exact.reshape(-1), got.reshape(-1)) if e != g)
    assert inexact > 0  # the check is not vacuous: most of these sums are rounded
    for bad, variant, pad in ((512, "roberta", 1), (-2, "roberta", 1), (514, "absolute", None), (-1, "absolute", None)):
        with pytest.raises(ValueError, match="length wall"):
            oracle.row_of(bad, 514, variant, pad)


# --------------------------------------------------------------------------------------------
# Identities


def test_every_learned_identity_holds():
    rows = identities.run_identities("learned")
    assert {r["id"] for r in rows} == {"learned.length-wall", "learned.zero-input-row", "learned.roberta-offset",
                                       "learned.backends-agree", "learned.correctly-rounded",
                                       "learned.backward-scatter-add"}
    assert all(r["verdict"] == "holds" and r["residual"] == 0.0 for r in rows), rows


def test_the_identities_catch_a_broken_reference(monkeypatch):
    """A clamping lookup breaks the length wall; a lookup that forgets RoBERTa's offset breaks
    roberta-offset; one that rounds through float32 breaks correctly-rounded."""
    real = L.lookup

    def clamped(x, positions, table, *, variant="absolute", padding_idx=None, backend="cpu"):
        p = np.clip(np.asarray(positions), 0, np.asarray(table).shape[0] - 1)
        return real(x, p, table, variant="absolute", backend=backend) if variant == "absolute" else \
            real(x, positions, table, variant=variant, padding_idx=padding_idx, backend=backend)

    def bert_style(x, positions, table, *, variant="absolute", padding_idx=None, backend="cpu"):
        if variant == "roberta":
            p = np.asarray(positions)
            return real(x, np.where(p < 0, padding_idx, p), table, backend=backend)
        return real(x, positions, table, backend=backend)

    def float32_sum(x, positions, table, **kw):
        return real(x, positions, table, **kw).astype(np.float32).astype(np.float64)

    for broken, identity in ((clamped, "learned.length-wall"), (bert_style, "learned.roberta-offset"),
                             (float32_sum, "learned.correctly-rounded")):
        monkeypatch.setattr(L, "lookup", broken)
        result = identities.run_identity(identities.REGISTRY[identity])
        assert result["verdict"] == "failing" and result["residual"] > 0, (identity, result)
    monkeypatch.setattr(L, "lookup", real)
