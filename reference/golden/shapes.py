"""The family-free parts of the serving shape matrix (docs/design.md, "Serving shapes").

Each family with batch, sequence and head axes draws its own matrix of fresh cases from these
sizes: batched decode with one token per row at far-apart positions, tile-boundary lengths, and
head counts that never equal the batch or sequence size. `posref conform --shapes full` grades
the whole matrix, a default run one case of each kind (``select``) and every case of the kinds
it must always grade (``always``: the lengths just past a tile, so that a kernel that leaves its
last partial tile unrotated fails whatever the seed).
"""

from __future__ import annotations

DECODE_BATCHES = (2, 7, 64)
TILE_LENGTHS = (1, 3, 63, 64, 65, 113, 127, 128, 129, 1000)
# Just past a tile of 64, 128 and 256 (one token into the next tile): a family whose default run
# must catch an unrotated tail tile grades these in every run (``always``), as a
# bug of the tail tile is caught only by a length that has one (issue 23: a kernel skipping the
# tail passed the default run at --seed 7 and failed it at --seed 8 when one length was drawn).
TAIL_LENGTHS = (65, 129, 257)
HEAD_COUNTS = (1, 3, 8, 32, 40, 64)
LONG_PREFILL = 8192
FAR_POSITION = 131071  # the last position of a 128K context


def heads_unlike(*sizes, choices=(3, 8, 32)):
    """The first head count of ``choices`` equal to none of the batch and sequence sizes (so
    that an implementation that confuses two axes cannot pass by coincidence)."""
    return next(h for h in choices if h not in sizes)


def distinct_rows(draw, count, low, high, fixed):
    """``count`` distinct positions in [low, high] (drawn), with fixed {row: position} set."""
    rows, seen = [], set(fixed.values())
    for k in range(count):
        if k in fixed:
            rows.append(fixed[k])
            continue
        p = draw.integer(low, high)
        while p in seen:
            p = low + (p - low + 1) % (high - low + 1)
        seen.add(p)
        rows.append(p)
    return rows


def decode_rows(draw, batch, far):
    """One position per row of a batched decode step: row 1 at ``far``, the last row at 0 (for
    more than two rows), the others drawn in [1, far - 1], so row 0 is never at 0."""
    return distinct_rows(draw, batch, 1, far - 1, {1: far, batch - 1: 0} if batch > 2 else {1: far})


def select(matrix, shapes, kinds, draw, fits=lambda group: True, always=()) -> list:
    """The test groups of ``matrix`` ([(kind, group)]) a run grades: all of them when ``shapes``
    is "full", else for each of ``kinds`` one drawn among that kind's groups that ``fits``, then
    every group of the kinds in ``always`` (graded by every run, whatever the seed)."""
    if shapes not in ("sample", "full"):
        raise ValueError(f"shapes must be 'sample' or 'full', got {shapes!r}")
    if shapes == "full":
        return [group for _, group in matrix]
    chosen = []
    for kind in kinds:
        choices = [group for k, group in matrix if k == kind and fits(group)]
        chosen.append(choices[draw.integer(0, len(choices) - 1)])
    return chosen + [group for k, group in matrix if k in always]


def matrix(variants, decode, seq, heads) -> list:
    """[(kind, group)] of the common matrix, drawn in this order: for each of ``variants`` (the
    configurations a family grades: pair layouts, model variants) a batched decode step of every
    size of DECODE_BATCHES (``decode(variant, batch)``); then every length of TILE_LENGTHS
    (``seq(variant, length)``) and every count of HEAD_COUNTS (``heads(variant, count)``), each
    alternating between the first two variants (the only one when there is one). Each callback
    draws its positions and returns one (kind, group)."""
    alternate = variants[:2]
    out = [decode(variant, b) for variant in variants for b in DECODE_BATCHES]
    out += [seq(alternate[k % len(alternate)], n) for k, n in enumerate(TILE_LENGTHS)]
    out += [heads(alternate[k % len(alternate)], h) for k, h in enumerate(HEAD_COUNTS)]
    return out


def seq_heads(length):
    """Heads of a tile-length case: one head past 100 tokens (the golden references settle every
    output in mpmath), else a count unlike the sequence length."""
    return 1 if length > 100 else heads_unlike(1, length)


def token_heads(group, rows=lambda test: test.positions) -> int:
    """(token, head)s of a shape case: rows x tokens per row x heads of its one test (``rows``
    gives the test's rows of tokens)."""
    test = group.tests[0]
    r = rows(test)
    return len(r) * len(r[0]) * test.heads


def fresh_cases(drawn, shape_matrix, kinds, max_token_heads=None, rows=lambda test: test.positions):
    """A family's ``fresh(draw, shapes="sample")``: its drawn cases (``drawn(draw)``), then its
    shape matrix (``shape_matrix(draw)``) as ``select`` picks it for ``shapes``; a default run
    draws each kind among the cases of at most ``max_token_heads`` (token, head)s (None: all)."""
    def fits(group):
        return max_token_heads is None or token_heads(group, rows) <= max_token_heads

    def fresh(draw, shapes="sample") -> list:
        groups = drawn(draw)
        return groups + select(shape_matrix(draw), shapes, kinds, draw, fits=fits)

    return fresh
