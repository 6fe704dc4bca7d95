"""The learned.lookup cases of one model's table (a reference.learned.model_config Setting).

At the model's own table: its rows N (BERT 512, RoBERTa 514 with padding_idx 1, GPT-2 1024) and
its width (768: every column is one independent addition, so the catalog reduces it to 8; here
the table is drawn, not stored, and keeps the model's). With ``last`` the largest position that
has a row (N - 1; RoBERTa: N - padding_idx - 2):

- ``prefill-8``: positions 0..7 (RoBERTa: rows padding_idx + 1 ..);
- ``drawn``: eight positions drawn from [8, last] (new with every seed);
- ``last-row-<last>``: the table's last row, which exists and must be read;
- ``row-offsets``: three rows at 0..3, the middle of the table and last-3 .. last;
- ``left-padded`` (RoBERTa): rows with 0, 2 and 4 pads, which read row padding_idx;
- ``wall-<last+1>``: one past the table, which must raise; ``wall-one-token``: only the very
  last token of the batch past it; ``negative-1`` (absolute tables): no row -1.

``committed``: every test but ``drawn``, stored and certified in vectors/ as
``learned.lookup/<model>/<test>`` (reference.zoo.vectors) at the model's own table, rows and width.
The table is not stored: it is named by its seed (``table_from`` "seed", reference.golden.seeded),
so a committed group keeps x, the positions and the expected values (about 0.3 MB a model) instead
of a 3 to 6 MB table a case.
"""

from __future__ import annotations

from dataclasses import replace

from reference.golden import seeded
from reference.golden.catalog import TestGroupSpec
from reference.learned.vectors import LearnedTest, _last_position, _left_padded_rows
from reference.zoo.vectors import seedless


def groups(setting, draw, protocol: str = "learned.lookup") -> list:
    """[TestGroupSpec] of learned.lookup for ``setting``, positions drawn from ``draw``."""
    params = setting.params
    roberta = params["variant"] == "roberta"
    last = _last_position(params)
    mid = last // 2
    offset = ("RobertaOffset",) if roberta else ()
    drawn = sorted(draw.integers(8, last, 8))
    tests = [
        _t("prefill-8", "Positions 0..7: the first rows of the table.", ("Prefill",) + offset, [range(8)]),
        _t("drawn", f"Eight positions drawn from [8, {last}] (new with the seed): {drawn}.", offset, [drawn]),
        _t(f"last-row-{last}", f"Position {last}, the last with a row in the model's {params['num_positions']} "
           "rows: it exists and must be read.", ("Decode", "LastRow") + offset, [[last]]),
        _t("row-offsets", f"Three rows at 0..3, {mid}..{mid + 3} and {last - 3}..{last}: each reads its own rows.",
           ("RowOffsets", "LastRow") + offset, [range(4), range(mid, mid + 4), range(last - 3, last + 1)]),
    ]
    if roberta:
        rows = _left_padded_rows(6, (0, 2, 4))
        tests.append(_t("left-padded", f"Left-padded rows {rows}: pads (-1) read row padding_idx, real tokens rows "
                        "padding_idx + 1 onwards.", ("LeftPadding", "PaddingRow", "RobertaOffset"), rows))
    tests += [
        _t(f"wall-{last + 1}", f"Position {last + 1} has no row in the model's table: the lookup must raise.",
           ("LengthWall",) + offset, [[last + 1]], True),
        _t("wall-one-token", f"Rows at 0..3 and {last - 2}..{last + 1}: only the last token is past the wall, and "
           "the whole call must raise.", ("LengthWall", "OneTokenPastWall") + offset,
           [range(4), range(last - 2, last + 2)], True),
    ]
    if not roberta:
        tests.append(_t("negative-1", "Positions -1, 0, 1, 2: there is no row -1, the lookup must raise.",
                        ("NegativePosition",), [[-1, 0, 1, 2]], True))
    return [TestGroupSpec(params, tuple(tests))]


def _t(name, comment, flags, positions, must_raise=False) -> LearnedTest:
    return LearnedTest(name, comment, ("ModelConfig",) + tuple(flags), tuple(tuple(r) for r in positions), must_raise)


def committed(setting, protocol: str = "learned.lookup") -> list:
    """The committed, certified cases of the zoo's models (reference.zoo.vectors): all but the drawn
    one, their tables named by seed (``table_from`` "seed")."""
    return [replace(tg, params={**tg.params, "table_from": seeded.SOURCE})
            for tg in _seedless(setting, protocol)]


_seedless = seedless(groups)
