"""The serving shape matrix of nope.apply's fresh cases (issue 14), with rope.apply's sizes:
batched decode, tile-boundary lengths, head counts and a long prefill; the default sample and
``shapes="full"``, the correct example on all of it, and a decode path that hands every row the
values of batch row 0 (a stride-0 batch), right at batch 1 and wrong at every batch of
one-token rows (the catalog's one such case, decode-rows, already shows it).

That failure has no name of its own: ``batch-row-zero-only`` is RoPE's (conformance/rope/
diagnosis.py) and NoPE's diagnosis names a rotation or an added vector only, so the test checks the
failure, that no other diagnosis is claimed, and the worst location (a batch row other than 0)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("torch")

from conformance import run_conformance  # noqa: E402
from conformance.loader import load_target  # noqa: E402
from reference.golden.fresh import Draw, fresh_cases  # noqa: E402
from reference.nope import vectors  # noqa: E402
from reference.rope import vectors as rope_vectors  # noqa: E402

PROTOCOL = "nope.apply"
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = f"{ROOT / 'examples' / 'nope' / 'llama4_style.py'}:apply"
SHAPES = f"{PROTOCOL}/fresh-*/shape-*"
_correct = load_target(EXAMPLE)


def row_zero_everywhere(x, positions, spec):
    """With one token per row, every row gets row 0's values."""
    if x.shape[1] == 1 and x.shape[0] > 1:
        return x[:1].expand_as(x).clone()
    return _correct(x, positions, spec)


def matrix_tests(seed):
    return [(kind, tg.params, tg.tests[0]) for kind, tg in vectors.shape_matrix(Draw(seed, PROTOCOL))]


def test_matrix_covers_the_serving_shapes():
    sizes = {t.name: (kind, len(t.positions), len(t.positions[0]), t.heads) for kind, _, t in matrix_tests(7)}
    decode = [(b, s) for kind, b, s, _ in sizes.values() if kind == "decode"]
    assert {b for b, _ in decode} == {2, 7, 64} and {s for _, s in decode} == {1}
    assert {s for kind, _, s, _ in sizes.values() if kind == "seq"} == set(rope_vectors.TILE_LENGTHS)
    assert {h for kind, *_, h in sizes.values() if kind == "heads"} == {1, 3, 8, 32, 40, 64}
    assert [s for kind, _, s, _ in sizes.values() if kind == "long"] == [8192]
    for name, (_, b, s, h) in sizes.items():  # no two axes of the same size, where both exist
        assert (h != s or s == 1) and (h != b or h == 1) and (s != b or s == 1), name


def test_decode_rows_are_distinct_and_far_apart():
    for seed in (1, 2):
        for kind, _, t in matrix_tests(seed):
            if kind == "decode":
                rows = [r[0] for r in t.positions]
                assert len(set(rows)) == len(rows) and rows[0] != 0 and 131071 in rows, t.name
                assert len(rows) == 2 or 0 in rows, t.name


def test_sample_is_a_few_small_cases_of_the_full_matrix():
    sample = vectors.fresh_apply(Draw(5, PROTOCOL), shapes="sample")[1:]
    full = vectors.fresh_apply(Draw(5, PROTOCOL), shapes="full")
    assert len(sample) == len(vectors.SAMPLE_KINDS) == 3 and len(full) == 1 + 20
    assert [tg.tests[0].name.split("-")[1] for tg in sample] == ["decode", "seq", "heads"]
    assert all(tg in full and vectors._token_heads(tg) <= vectors.SAMPLE_MAX_TOKEN_HEADS for tg in sample)
    cases = {c.id.rsplit("/", 1)[1]: c for c in fresh_cases(PROTOCOL, 5)}
    for tg in sample:
        t = tg.tests[0]
        assert cases[t.name].arrays["x"].shape == (len(t.positions), len(t.positions[0]), t.heads, 128)


def test_shapes_option_is_checked():
    with pytest.raises(ValueError, match="shapes"):
        vectors.fresh_apply(Draw(1, PROTOCOL), shapes="all")
    with pytest.raises(ValueError, match="shapes"):
        fresh_cases(PROTOCOL, 1, shapes="most")


def test_correct_example_passes_the_full_matrix():
    report = run_conformance(EXAMPLE, PROTOCOL, shapes="full", seed=9, dtypes=("float32",), identities=False,
                             cases=SHAPES)
    assert len(report.cases) == 20
    assert report.summary()["overall"] == "pass", [(c.id, c.verdict) for c in report.cases if c.verdict == "fail"]


def test_row_zero_bug_fails_every_batch_of_one_token_rows():
    catalog_only = run_conformance(row_zero_everywhere, PROTOCOL, dtypes=("float32",), fresh=False, identities=False)
    assert [c.id for c in catalog_only.cases if c.verdict == "fail"] == ["nope.apply/nope-layer-d128/decode-rows"]
    report = run_conformance(row_zero_everywhere, PROTOCOL, shapes="full", seed=3, dtypes=("float32",),
                             identities=False, cases=SHAPES)
    failing = {c.id.rsplit("/", 1)[1]: c for c in report.cases if c.verdict == "fail"}
    assert set(failing) == {"shape-decode-b2", "shape-decode-b7", "shape-decode-b64", "shape-seq-1"}
    for c in failing.values():
        row = re.match(r"batch row (\d+), position \d+ \(token 0\)", c.worst_location)
        assert row and int(row.group(1)) >= 1, c.worst_location
        assert c.diagnoses == [], c.diagnoses  # neither a rotation nor an added vector claimed
