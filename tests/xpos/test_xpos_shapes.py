"""The serving shape matrix of xpos.apply's fresh cases (issue 14): what it holds, the default
sample and ``shapes="full"``, the correct example on all of it, and a fused kernel that rotates and
scales only batch row 0 at decode, which passes the catalog and fails every batched-decode case.

xPos's diagnosis names it ``batch-row-zero-only`` (RoPE's code, same meaning), and the worst
location is a batch row other than 0."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("torch")

from conformance import run_conformance  # noqa: E402
from conformance.loader import load_target  # noqa: E402
from reference.golden import catalog, certify  # noqa: E402
from reference.golden.fresh import Draw, fresh_cases  # noqa: E402
from reference.rope import vectors as rope_vectors  # noqa: E402
from reference.xpos import vectors  # noqa: E402

PROTOCOL = "xpos.apply"
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = f"{ROOT / 'examples' / 'xpos' / 'torchscale_style.py'}:apply"
SHAPES = f"{PROTOCOL}/fresh-*/shape-*"
_correct = load_target(EXAMPLE)


def row_zero_only(q, k, positions, spec):
    """A fused kernel that, with one token per row, launches over row 0 only: rows 1.. come back
    as they went in."""
    qo, ko = _correct(q, k, positions, spec)
    if q.shape[1] == 1 and q.shape[0] > 1:
        qo, ko = qo.clone(), ko.clone()
        qo[1:], ko[1:] = q[1:], k[1:]
    return qo, ko


def matrix_tests(seed):
    return [(kind, tg.params, tg.tests[0]) for kind, tg in vectors.shape_matrix(Draw(seed, PROTOCOL))]


def test_matrix_covers_the_serving_shapes():
    sizes = {t.name: (kind, len(t.positions), len(t.positions[0]), t.heads) for kind, _, t in matrix_tests(7)}
    decode = [(b, s) for kind, b, s, _ in sizes.values() if kind == "decode"]
    assert {b for b, _ in decode} == {2, 7, 64} and {s for _, s in decode} == {1}
    assert {s for kind, _, s, _ in sizes.values() if kind == "seq"} == set(rope_vectors.TILE_LENGTHS)
    assert {h for kind, *_, h in sizes.values() if kind == "heads"} == {1, 3, 8, 32, 40, 64}
    assert {name.rsplit("-", 1)[1] for name in sizes} == {"half", "interleaved"}
    for name, (_, b, s, h) in sizes.items():  # no two axes of the same size, where both exist
        assert (h != s or s == 1) and (h != b or h == 1) and (s != b or s == 1), name


def test_decode_rows_are_distinct_and_span_a_float16_safe_range():
    for seed in (1, 2):
        for kind, _, t in matrix_tests(seed):
            assert max(max(r) for r in t.positions) <= vectors.FAR_POSITION == 4095, t.name
            if kind == "decode":
                rows = [r[0] for r in t.positions]
                assert len(set(rows)) == len(rows) and rows[0] != 0 and 4095 in rows, t.name
                assert len(rows) == 2 or 0 in rows, t.name


def test_sample_is_a_few_cheap_cases_of_the_full_matrix():
    sample = vectors.fresh_groups(Draw(5, PROTOCOL), shapes="sample")[1:]
    full = vectors.fresh_groups(Draw(5, PROTOCOL), shapes="full")
    assert len(sample) == len(vectors.SAMPLE_KINDS) == 3 and len(full) == 1 + 22
    assert [tg.tests[0].name.split("-")[1] for tg in sample] == ["decode", "seq", "heads"]
    assert all(tg in full and vectors._token_heads(tg) <= vectors.SAMPLE_MAX_TOKEN_HEADS for tg in sample)
    cases = {c.id.rsplit("/", 1)[1]: c for c in fresh_cases(PROTOCOL, 5)}
    for tg in sample:
        t = tg.tests[0]
        assert cases[t.name].arrays["q"].shape == (len(t.positions), len(t.positions[0]), t.heads, 8)


def test_shapes_option_is_checked():
    with pytest.raises(ValueError, match="shapes"):
        vectors.fresh_groups(Draw(1, PROTOCOL), shapes="all")
    with pytest.raises(ValueError, match="shapes"):
        fresh_cases(PROTOCOL, 1, shapes="most")


def test_batched_decode_expected_values_are_certified():
    proto = catalog.protocol(PROTOCOL)
    total = certify.Certificate(proto.rounding)
    for kind, tg in vectors.shape_matrix(Draw(3, PROTOCOL)):
        if kind == "decode" and len(tg.tests[0].positions) <= 7:
            test_params, inputs = proto.build(f"{PROTOCOL}/fresh-3/{tg.tests[0].name}", dict(tg.params), tg.tests[0])
            params = {**tg.params, **test_params}
            total.add(certify.certify_case(proto, params, inputs, proto.compute(params, inputs, "cpu")))
    assert total.ok and total.certified == 2 * 2 * 9 * 3 * vectors.SHAPE_HEAD_DIM  # q and k


def test_correct_example_passes_the_default_sample():
    report = run_conformance(EXAMPLE, PROTOCOL, seed=4, dtypes=("float32", "bfloat16"), identities=False,
                             cases=SHAPES)
    assert len(report.cases) == 2 * 3
    assert report.summary()["overall"] == "pass", [(c.id, c.dtype, c.verdict) for c in report.cases]


@pytest.mark.slow  # about 5 s: 45 000 golden values (q and k) settled in mpmath, then graded
def test_correct_example_passes_the_full_matrix():
    report = run_conformance(EXAMPLE, PROTOCOL, shapes="full", seed=9, dtypes=("float32",), identities=False)
    assert report.summary()["overall"] == "pass", [(c.id, c.verdict) for c in report.cases if c.verdict == "fail"]
    graded = {c.id.rsplit("/", 1)[1] for c in report.cases if c.verdict in ("pass", "acceptable")}
    assert {"shape-decode-b64-interleaved", "shape-decode-b64-half", "shape-seq-1000-half",
            "shape-heads-64-half"} <= graded


def test_batch_row_zero_bug_passes_the_catalog_but_not_the_batched_decode_cases():
    catalog_only = run_conformance(row_zero_only, PROTOCOL, dtypes=("float32",), fresh=False, identities=False)
    assert catalog_only.summary()["overall"] == "pass"
    for seed in (1, 2):
        report = run_conformance(row_zero_only, PROTOCOL, seed=seed, dtypes=("float32",), identities=False,
                                 cases=SHAPES)
        failing = [c for c in report.cases if c.verdict == "fail"]
        assert [c.id for c in failing] == [c.id for c in report.cases if "/shape-decode-" in c.id] != []
        for c in failing:
            row = re.search(r"batch row (\d+),", c.worst_location)
            assert row and int(row.group(1)) >= 1, c.worst_location
            assert [d.code for d in c.diagnoses] == ["batch-row-zero-only"], c.diagnoses
