"""The serving shape matrix of learned.lookup's fresh cases (issue 14): what it holds (batched
decode rows each at its own position inside the table, tile-boundary lengths, table widths), the
default sample and ``shapes="full"``, the correct examples on all of it, and a lookup that takes
the positions of batch row 0 for every row at decode, which passes the catalog and fails every
batch of one-token rows.

That failure has no name of its own: ``batch-row-zero-only`` is RoPE's (conformance/rope/
diagnosis.py) and the lookup's diagnosis names shifted rows only, so the test checks the failure,
that no other diagnosis is claimed, and the worst location (a batch row other than 0)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("torch")

from conformance import run_conformance  # noqa: E402
from conformance.loader import load_target  # noqa: E402
from reference.golden.fresh import Draw, fresh_cases  # noqa: E402
from reference.learned import vectors  # noqa: E402
from reference.rope import vectors as rope_vectors  # noqa: E402

PROTOCOL = "learned.lookup"
ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "learned"
SHAPES = f"{PROTOCOL}/fresh-*/shape-*"
_correct = load_target(f"{EXAMPLES / 'gpt2_wpe.py'}:lookup")


def positions_of_row_zero(x, positions, table, spec):
    """A decode path that broadcasts row 0's position to the batch when every row holds one token."""
    if x.shape[1] == 1 and x.shape[0] > 1:
        positions = positions[:1].expand_as(positions)
    return _correct(x, positions, table, spec)


def matrix_tests(seed):
    return [(kind, tg.params, tg.tests[0]) for kind, tg in vectors.shape_matrix(Draw(seed, PROTOCOL))]


def test_matrix_covers_the_serving_shapes():
    sizes = {t.name: (kind, len(t.positions), len(t.positions[0]), p["d_model"]) for kind, p, t in matrix_tests(7)}
    decode = [(b, s) for kind, b, s, _ in sizes.values() if kind == "decode"]
    assert sorted(b for b, _ in decode) == [2, 2, 7, 7, 64, 64] and {s for _, s in decode} == {1}
    assert {s for kind, _, s, _ in sizes.values() if kind == "seq"} == set(rope_vectors.TILE_LENGTHS)
    assert {d for kind, *_, d in sizes.values() if kind == "width"} == set(vectors.WIDTHS)
    for name, (_, b, s, d) in sizes.items():  # no two axes of the same size, where both exist
        assert (d != s or s == 1) and (d != b or d == 1) and (s != b or s == 1), name


def test_every_position_is_inside_its_table_and_decode_rows_span_it():
    for seed in (1, 2):
        for kind, params, t in matrix_tests(seed):
            last = vectors._last_position(params)
            assert all(0 <= p <= last for row in t.positions for p in row) and not t.must_raise, t.name
            if kind == "decode":
                rows = [r[0] for r in t.positions]
                assert len(set(rows)) == len(rows) and rows[0] != 0 and last in rows, t.name
                assert len(rows) == 2 or 0 in rows, t.name
            if kind == "seq":
                assert t.positions[0] != t.positions[1], t.name


def test_sample_is_one_case_of_each_kind_of_the_full_matrix():
    sample = vectors.fresh_lookups(Draw(5, PROTOCOL), shapes="sample")[1:]
    full = vectors.fresh_lookups(Draw(5, PROTOCOL), shapes="full")
    assert len(sample) == len(vectors.SAMPLE_KINDS) == 3 and len(full) == 1 + 21
    assert [tg.tests[0].name.split("-")[1] for tg in sample] == ["decode", "seq", "width"]
    assert all(tg in full for tg in sample)
    cases = {c.id.rsplit("/", 1)[1]: c for c in fresh_cases(PROTOCOL, 5)}
    for tg in sample:
        t = tg.tests[0]
        assert cases[t.name].arrays["x"].shape == (len(t.positions), len(t.positions[0]), tg.params["d_model"])


def test_shapes_option_is_checked():
    with pytest.raises(ValueError, match="shapes"):
        vectors.fresh_lookups(Draw(1, PROTOCOL), shapes="all")
    with pytest.raises(ValueError, match="shapes"):
        fresh_cases(PROTOCOL, 1, shapes="most")


@pytest.mark.parametrize("example", ["gpt2_wpe.py", "roberta_position_ids.py"])
def test_correct_examples_pass_the_full_matrix(example):
    report = run_conformance(f"{EXAMPLES / example}:lookup", PROTOCOL, shapes="full", seed=9, dtypes=("float32",),
                             identities=False, cases=SHAPES)
    assert len(report.cases) == 21
    assert report.summary()["overall"] == "pass", [(c.id, c.verdict) for c in report.cases if c.verdict == "fail"]


def test_row_zero_positions_bug_passes_the_catalog_but_not_the_batched_decode_cases():
    catalog_only = run_conformance(positions_of_row_zero, PROTOCOL, dtypes=("float32",), fresh=False,
                                   identities=False)
    assert catalog_only.summary()["overall"] == "pass"
    report = run_conformance(positions_of_row_zero, PROTOCOL, shapes="full", seed=3, dtypes=("float32",),
                             identities=False, cases=SHAPES)
    failing = {c.id.rsplit("/", 1)[1]: c for c in report.cases if c.verdict == "fail"}
    batches_of_one_token = {f"shape-decode-b{b}-{m}" for b in (2, 7, 64) for m in ("gpt2", "roberta-base")}
    assert set(failing) == batches_of_one_token | {"shape-seq-1-gpt2"}  # seq-1: two rows of one token
    for c in failing.values():
        row = re.match(r"batch row (\d+), position \d+ \(token 0\)", c.worst_location)
        assert row and int(row.group(1)) >= 1, c.worst_location
        assert c.diagnoses == [], c.diagnoses  # no shifted row (position-offset) claimed
