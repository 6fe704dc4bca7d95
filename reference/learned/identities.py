"""Learned absolute position embedding identities, checked on the reference.

Every check draws its inputs from a generator seeded by the identity's id (reproducible) with the
real table lengths (BERT-base 512, GPT-2 1024, RoBERTa-base 514 with padding_idx 1), and looks
``reference.learned``'s functions up at call time, so that a replaced function is what gets
checked.

Error model behind the bounds: the lookup is one IEEE float64 addition per element, x + t, which
is correctly rounded (error at most u |x + t|, u = 2^-53) and exact whenever one operand is zero
(0 + t = t). Rows are integers: a refusal, a row or a shifted row involves no rounding at all. So
every identity here holds *exactly* and every bound is 0: a residual above 0 is a bug, never noise.
"""

from __future__ import annotations

import zlib

import mpmath
import numpy as np

from reference import learned
from reference.identities import register
from reference.learned import backward

# (num_positions, variant, padding_idx): BERT-base, GPT-2, RoBERTa-base.
TABLES = ((512, "absolute", None), (1024, "absolute", None), (514, "roberta", 1))
D_MODEL = 16
BACKENDS = ("cpu", "numpy")  # cuda under the simulator is checked by tests/learned (a subprocess)


def _rng(name: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(name.encode()))


def _inputs(rng, num_positions, variant, padding_idx, batch=3, seq=40):
    """x [batch, seq, D], valid positions [batch, seq] (edges 0 / -1 and the last one included),
    table [N, D], all float64 N(0, 1) with a few exact zeros, huge and tiny values mixed in."""
    low, high = learned.position_range(num_positions, variant, padding_idx)
    pos = rng.integers(low, high, size=(batch, seq), endpoint=True)
    pos[0, 0], pos[0, 1] = low, high
    if variant == "roberta":
        pos[1, :3] = -1  # left padding
    x = rng.standard_normal((batch, seq, D_MODEL)) * np.exp2(rng.integers(-30, 30, size=(batch, seq, D_MODEL)))
    table = rng.standard_normal((num_positions, D_MODEL))
    x[0, 2] = 0.0
    table[-1, :2] = 0.0
    return x, pos.astype(np.int64), table


@register(id="learned.length-wall", bound=0.0,
          statement="every position whose row is outside the table (at or past row N, or negative other than "
                    "RoBERTa's -1) is refused, every one inside is accepted")
def length_wall() -> float:
    """Residual: the number of misjudged positions (refused inside the wall or accepted outside),
    plus the number of refusals whose message is not one line starting with ``positions:`` or
    does not name the length wall. Tried per table: each position from low - 3 to low + 3 and
    from high - 3 to high + 3, then N + 1000 and 2^62, each alone and as the one bad token of an
    otherwise valid batch (low, high: the accepted range, ``position_range``).

    Bound 0: accepting or refusing is a decision on integers, with no rounding anywhere.
    """
    bad = 0
    x1 = np.zeros((2, 3, 2))
    for n, variant, pad in TABLES:
        table = np.ones((n, 2))
        low, high = learned.position_range(n, variant, pad)
        tried = list(range(low - 3, low + 4)) + list(range(high - 3, high + 4)) + [n + 1000, 2**62]
        for p in tried:
            inside = low <= p <= high
            alone = np.array([[p]], dtype=np.int64)
            batch = np.array([[low, high, low], [high, low, p]], dtype=np.int64)
            for pos in (alone, batch):
                x = x1[:, :3] if pos.shape == (2, 3) else x1[:1, :1]
                try:
                    learned.lookup(x, pos, table, variant=variant, padding_idx=pad, backend="numpy")
                    refused = None
                except ValueError as exc:
                    refused = str(exc)
                if (refused is None) != inside:
                    bad += 1
                elif refused is not None and (not refused.startswith("positions:") or "\n" in refused
                                              or "length wall" not in refused):
                    bad += 1
    return float(bad)


@register(id="learned.zero-input-row", bound=0.0,
          statement="lookup(0, p, T) = T[row(p)] bit for bit (adding zero is exact), every backend")
def zero_input_row() -> float:
    """Residual: max |lookup(0, p, T) - T[row(p)]| over random valid positions of the three
    tables, on the cpu and numpy backends.

    Bound 0: 0 + t = t exactly in IEEE arithmetic (also for t = 0, where only the sign of a zero
    may differ, which |.| does not see).
    """
    rng = _rng("learned.zero-input-row")
    worst = 0.0
    for n, variant, pad in TABLES:
        _, pos, table = _inputs(rng, n, variant, pad)
        rows = learned.rows(pos, n, variant=variant, padding_idx=pad)
        zero = np.zeros(pos.shape + (D_MODEL,))
        for backend in BACKENDS:
            out = learned.lookup(zero, pos, table, variant=variant, padding_idx=pad, backend=backend)
            worst = max(worst, float(np.max(np.abs(out - table[rows]))))
    return worst


@register(id="learned.roberta-offset", bound=0.0,
          statement="lookup_roberta(x, p, T; padding_idx k) = lookup_absolute(x, p + k + 1, T), padding (-1) "
                    "reading row k")
def roberta_offset() -> float:
    """Residual: max |roberta lookup - absolute lookup at p + k + 1| for RoBERTa-base's table
    (k = 1) and for k = 0 and k = 5 on the same 514 rows, left padding included, plus the number of
    padding tokens whose row is not k.

    Bound 0: both sides add the same float64 row to the same x (one correctly rounded addition
    each), so they agree bit for bit; the row shift is integer arithmetic.
    """
    rng = _rng("learned.roberta-offset")
    worst = 0.0
    for k in (1, 0, 5):
        x, pos, table = _inputs(rng, 514, "roberta", k)
        rows = learned.rows(pos, 514, variant="roberta", padding_idx=k)
        worst += float(np.count_nonzero(rows[pos == -1] != k))
        for backend in BACKENDS:
            a = learned.lookup(x, pos, table, variant="roberta", padding_idx=k, backend=backend)
            b = learned.lookup(x, pos + k + 1, table, variant="absolute", backend=backend)
            worst = max(worst, float(np.max(np.abs(a - b))))
    return worst


@register(id="learned.backends-agree", bound=0.0,
          statement="the Numba CPU and NumPy backends agree bit for bit (one IEEE addition per element)")
def backends_agree() -> float:
    """Residual: the number of elements whose bits differ between the cpu and numpy backends,
    over the three tables with x spanning 2^-30..2^30 (cancellation, absorption, exact zeros),
    plus NaN and Inf inputs, which must propagate the same way.

    Bound 0: both compute fl(x + t) with round-to-nearest-even, without fastmath; IEEE fixes the
    result of one addition. (numba.cuda is checked the same way by tests/learned, in a
    subprocess under the simulator, and compiled to PTX for sm_80 / sm_90.)
    """
    rng = _rng("learned.backends-agree")
    differ = 0
    for n, variant, pad in TABLES:
        x, pos, table = _inputs(rng, n, variant, pad)
        x[1, 0, 0], x[1, 0, 1], x[1, 0, 2] = np.nan, np.inf, -np.inf
        kw = dict(variant=variant, padding_idx=pad)
        a = learned.lookup(x, pos, table, backend="cpu", **kw)
        b = learned.lookup(x, pos, table, backend="numpy", **kw)
        differ += int(np.count_nonzero(a.view(np.int64) != b.view(np.int64)))
    return float(differ)


@register(id="learned.correctly-rounded", bound=0.0,
          statement="lookup equals the exact sum x + T[row] (mpmath) rounded to the nearest float64")
def correctly_rounded() -> float:
    """Residual: the largest distance in ulps between the reference (cpu backend) and the exact
    sum computed by mpmath (``fadd(..., exact=True)``) rounded to float64, over 2 x 8 tokens of
    each table with x spanning 2^-30..2^30 (so that most sums are inexact).

    Bound 0: one IEEE addition is correctly rounded, so the values are equal.
    """
    rng = _rng("learned.correctly-rounded")
    worst = 0.0
    for n, variant, pad in TABLES:
        x, pos, table = _inputs(rng, n, variant, pad, batch=2, seq=8)
        out = learned.lookup(x, pos, table, variant=variant, padding_idx=pad, backend="cpu")
        rows = learned.rows(pos, n, variant=variant, padding_idx=pad)
        for idx in np.ndindex(out.shape):
            b, s, j = idx
            exact = mpmath.fadd(mpmath.mpf(float(x[idx])), mpmath.mpf(float(table[rows[b, s], j])), exact=True)
            want = float(exact)
            if out[idx] != want:
                worst = max(worst, abs(out[idx] - want) / np.spacing(abs(want)))
    return float(worst)


# ---- the backward pass (reference/learned/backward.py) ------------------------------------------


@register(id="learned.backward-scatter-add", bound=0.0,
          statement="the VJP of x + table[row]: grad_x = g, and grad_table[r] = the exact sum of the g of the "
          "tokens reading row r, correctly rounded (golden), 0 for unread rows (BERT, GPT-2, RoBERTa)")
def backward_scatter_add() -> float:
    """Residual: largest difference between (grad_x, golden grad_table) and (g, the float64 nearest to
    the exact rational sum of each row's contributions); also between the fast grad_table and it on the
    rows read by at most two tokens, and 0 on unread rows (0 when all agree bit for bit).

    Bound 0: grad_x is g converted, exactly. The golden table gradient is math.fsum of each row's
    contributions, which rounds the exact sum once, as float(Fraction) does; the fast scatter-add
    starts from 0 (0 + g_1 = g_1 exactly) and rounds g_1 + g_2 once, so rows with at most two readers
    are correctly rounded too. Contributions span 2^-60..2^60 with cancelling pairs, so a sloppy
    summation shows.
    """
    from fractions import Fraction


    rng = _rng("learned.backward-scatter-add")
    worst = 0.0
    for num_positions, variant, padding_idx in TABLES:
        low, high = learned.position_range(num_positions, variant, padding_idx)
        pos = rng.integers(low, min(high, low + 8), size=(3, 20), endpoint=True)
        pos[2, -1] = high  # read once
        g = rng.standard_normal((3, 20, D_MODEL)) * np.exp2(rng.integers(-60, 60, size=(3, 20, D_MODEL)))
        g[1, 1] = -g[1, 0] * (1 + 2.0 ** -40)  # a near cancellation where they share a row
        pos[1, 1] = pos[1, 0]
        gx, gt = backward.lookup_vjp(g, pos, num_positions, variant=variant, padding_idx=padding_idx, mode="golden")
        _, fast = backward.lookup_vjp(g, pos, num_positions, variant=variant, padding_idx=padding_idx)
        rows = learned.rows(pos, num_positions, variant=variant, padding_idx=padding_idx).reshape(-1)
        exact = [[Fraction(0)] * D_MODEL for _ in range(num_positions)]
        for t, r in enumerate(rows.tolist()):
            for j, v in enumerate(g.reshape(-1, D_MODEL)[t].tolist()):
                exact[r][j] += Fraction(v)
        want = np.array([[float(v) for v in row] for row in exact])
        counts = np.bincount(rows, minlength=num_positions)
        few = counts <= 2
        for got, ref in ((gx, g), (gt, want), (fast[few], want[few])):
            diff = np.abs(np.asarray(got) - np.asarray(ref))
            worst = max(worst, float(np.max(diff)) if diff.size else 0.0)
    return worst
