"""The serving shape matrix of mrope.apply's fresh cases (issue 14): what it holds (batched decode
rows each at its own (t, h, w), tile-boundary lengths of text and image tokens, head counts), the
default sample and ``shapes="full"``, the correct example on all of it, and an implementation that
takes the positions of batch row 0 for every row at decode, which passes the catalog and fails
every batched-decode case.

That failure has no name of its own: ``batch-row-zero-only`` is RoPE's (conformance/rope/
diagnosis.py) and M-RoPE's diagnosis does not look for it, so the test checks the failure, that no
other diagnosis is claimed, and the worst location (a batch row other than 0)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("torch")

from conformance import run_conformance  # noqa: E402
from conformance.loader import load_target  # noqa: E402
from reference.golden import catalog, certify  # noqa: E402
from reference.golden.fresh import Draw, fresh_cases  # noqa: E402
from reference.mrope import vectors  # noqa: E402
from reference.rope import vectors as rope_vectors  # noqa: E402

PROTOCOL = "mrope.apply"
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = f"{ROOT / 'examples' / 'mrope' / 'qwen_vl.py'}:apply"
SHAPES = f"{PROTOCOL}/fresh-*/shape-*"
_correct = load_target(EXAMPLE)


def positions_of_row_zero(x, positions, spec):
    """A decode path that broadcasts row 0's (t, h, w) to the batch when every row holds one token."""
    if x.shape[1] == 1 and x.shape[0] > 1:
        positions = positions[:, :1].expand_as(positions)
    return _correct(x, positions, spec)


def matrix_tests(seed):
    return [(kind, tg.params, tg.tests[0]) for kind, tg in vectors.shape_matrix(Draw(seed, PROTOCOL))]


def test_matrix_covers_the_serving_shapes():
    sizes = {t.name: (kind, len(t.positions[0]), len(t.positions[0][0]), t.heads) for kind, _, t in matrix_tests(7)}
    decode = [(b, s) for kind, b, s, _ in sizes.values() if kind == "decode"]
    assert {b for b, _ in decode} == {2, 7, 64} and {s for _, s in decode} == {1}
    assert {s for kind, _, s, _ in sizes.values() if kind == "seq"} == set(rope_vectors.TILE_LENGTHS)
    assert {h for kind, *_, h in sizes.values() if kind == "heads"} == {1, 3, 8, 32, 40, 64}
    assert {name.rsplit("-", 1)[1] for name in sizes} == {"qwen2", "qwen3"}
    for name, (_, b, s, h) in sizes.items():  # no two axes of the same size, where both exist
        assert (h != s or s == 1) and (h != b or h == 1) and (s != b or s == 1), name


def test_decode_rows_have_their_own_t_h_w():
    for seed in (1, 2):
        for kind, params, t in matrix_tests(seed):
            assert sum(params["mrope_section"]) == params["rotary_dim"] // 2 == 8, t.name
            if kind != "decode":
                continue
            rows = list(zip(*(tuple(r[0] for r in stream) for stream in t.positions)))  # (t, h, w) per row
            assert len(set(r[0] for r in rows)) == len(rows) and rows[1][2] == 131071, t.name
            assert all(tt < hh < ww for tt, hh, ww in rows if (tt, hh, ww) != (0, 0, 0)), t.name
            assert len(rows) == 2 or rows[-1] == (0, 0, 0), t.name


def test_sample_is_a_few_cheap_cases_of_the_full_matrix():
    drawn = len(vectors.MODELS)  # one drawn case per model configuration first
    sample = vectors.fresh_groups(Draw(5, PROTOCOL), shapes="sample")[drawn:]
    full = vectors.fresh_groups(Draw(5, PROTOCOL), shapes="full")
    assert len(sample) == len(vectors.SAMPLE_KINDS) == 3 and len(full) == drawn + 22
    assert [tg.tests[0].name.split("-")[1] for tg in sample] == ["decode", "seq", "heads"]
    assert all(tg in full and vectors._token_heads(tg) <= vectors.SAMPLE_MAX_TOKEN_HEADS for tg in sample)
    cases = {c.id.rsplit("/", 1)[1]: c for c in fresh_cases(PROTOCOL, 5)}
    for tg in sample:
        t = tg.tests[0]
        assert cases[t.name].arrays["positions"].shape == (3, len(t.positions[0]), len(t.positions[0][0]))


def test_shapes_option_is_checked():
    with pytest.raises(ValueError, match="shapes"):
        vectors.fresh_groups(Draw(1, PROTOCOL), shapes="all")
    with pytest.raises(ValueError, match="shapes"):
        fresh_cases(PROTOCOL, 1, shapes="most")


def test_batched_decode_expected_values_are_certified():
    proto = catalog.protocol(PROTOCOL)
    total = certify.Certificate(proto.rounding)
    for kind, tg in vectors.shape_matrix(Draw(3, PROTOCOL)):
        if kind == "decode" and len(tg.tests[0].positions[0]) <= 7:
            test_params, inputs = proto.build(f"{PROTOCOL}/fresh-3/{tg.tests[0].name}", dict(tg.params), tg.tests[0])
            params = {**tg.params, **test_params}
            total.add(certify.certify_case(proto, params, inputs, proto.compute(params, inputs, "cpu")))
    assert total.ok and total.certified == 2 * 9 * 3 * 16


def test_correct_example_passes_the_default_sample():
    report = run_conformance(EXAMPLE, PROTOCOL, seed=4, dtypes=("float32", "bfloat16"), identities=False,
                             cases=SHAPES)
    assert len(report.cases) == 2 * 3
    assert report.summary()["overall"] == "pass", [(c.id, c.dtype, c.verdict) for c in report.cases]


def test_correct_example_passes_the_full_matrix():
    """About 3 s: 45 000 golden values settled in mpmath, then graded."""
    report = run_conformance(EXAMPLE, PROTOCOL, shapes="full", seed=9, dtypes=("float32",), identities=False)
    assert report.summary()["overall"] == "pass", [(c.id, c.verdict) for c in report.cases if c.verdict == "fail"]
    graded = {c.id.rsplit("/", 1)[1] for c in report.cases if c.verdict in ("pass", "acceptable")}
    assert {"shape-decode-b64-qwen2", "shape-decode-b64-qwen3", "shape-seq-1000-qwen3",
            "shape-heads-64-qwen3"} <= graded


def test_row_zero_positions_bug_passes_the_catalog_but_not_the_batched_decode_cases():
    catalog_only = run_conformance(positions_of_row_zero, PROTOCOL, dtypes=("float32",), fresh=False,
                                   identities=False)
    assert catalog_only.summary()["overall"] == "pass"
    for seed in (1, 2):
        report = run_conformance(positions_of_row_zero, PROTOCOL, seed=seed, dtypes=("float32",), identities=False,
                                 cases=SHAPES)
        failing = [c for c in report.cases if c.verdict == "fail"]
        assert [c.id for c in failing] == [c.id for c in report.cases if "/shape-decode-" in c.id] != []
        for c in failing:
            row = re.match(r"batch row (\d+), token 0 \(t \d+, h \d+, w \d+\)", c.worst_location)
            assert row and int(row.group(1)) >= 1, c.worst_location
            assert c.diagnoses == [], c.diagnoses  # no wrong name (section, stream, variant) claimed
