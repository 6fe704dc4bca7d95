"""The serving shape matrix of rope2d.apply's fresh cases (issue 14): what it holds (batched rows
of one patch each at their own (x, y), tile-boundary lengths with and without a CLS token, head
counts), the default sample and ``shapes="full"``, the correct example on all of it, and an
implementation that takes the coordinates of batch row 0 for every row of one patch, which passes
the catalog and fails every batched single-patch case.

That failure has no name of its own: ``batch-row-zero-only`` is RoPE's (conformance/rope/
diagnosis.py) and 2-D RoPE's diagnosis does not look for it, so the test checks the failure, that
no other diagnosis is claimed, and the worst location (a batch row other than 0)."""

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
from reference.rope2d import vectors  # noqa: E402

PROTOCOL = "rope2d.apply"
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = f"{ROOT / 'examples' / 'rope2d' / 'rope_vit.py'}:apply"
SHAPES = f"{PROTOCOL}/fresh-*/shape-*"
_correct = load_target(EXAMPLE)


def coords_of_row_zero(x, coords, spec):
    """A single-patch path that broadcasts row 0's (x, y) to the batch."""
    if x.shape[1] == 1 and x.shape[0] > 1:
        coords = coords[:1].expand_as(coords)
    return _correct(x, coords, spec)


def matrix_tests(seed):
    return [(kind, tg.params, tg.tests[0]) for kind, tg in vectors.shape_matrix(Draw(seed, PROTOCOL))]


def test_matrix_covers_the_serving_shapes():
    sizes = {t.name: (kind, len(t.coords), len(t.coords[0]), t.heads) for kind, _, t in matrix_tests(7)}
    decode = [(b, s) for kind, b, s, _ in sizes.values() if kind == "decode"]
    assert {b for b, _ in decode} == {2, 7, 64} and {s for _, s in decode} == {1}
    assert {s for kind, _, s, _ in sizes.values() if kind == "seq"} == set(rope_vectors.TILE_LENGTHS)
    assert {h for kind, *_, h in sizes.values() if kind == "heads"} == {1, 3, 8, 32, 40, 64}
    assert {name.rsplit("-", 1)[1] for name in sizes} == {"vl", "vit"}  # qwen2-vl and vit
    for name, (_, b, s, h) in sizes.items():  # no two axes of the same size, where both exist
        assert (h != s or s == 1) and (h != b or h == 1) and (s != b or s == 1), name


def test_patches_are_distinct_and_cls_tokens_lead_the_vit_prefills():
    for seed in (1, 2):
        for kind, params, t in matrix_tests(seed):
            pts = [p for row in t.coords for p in row]
            assert all(0 <= c <= vectors.FAR_COORD for p in pts[params["cls_tokens"]:] for c in p), t.name
            assert len(set(pts)) == len(pts), t.name
            if kind == "decode":
                assert params["cls_tokens"] == 0 and (4095, 4095) in pts and pts[0] != (0, 0), t.name
                assert len(pts) == 2 or (0, 0) in pts, t.name
            if kind == "seq" and t.name.endswith("-vit"):
                assert params["cls_tokens"] == 1 and pts[0] == (-1, -1), t.name


def test_sample_is_a_few_cheap_cases_of_the_full_matrix():
    sample = vectors.fresh_groups(Draw(5, PROTOCOL), shapes="sample")[1:]
    full = vectors.fresh_groups(Draw(5, PROTOCOL), shapes="full")
    assert len(sample) == len(vectors.SAMPLE_KINDS) == 3 and len(full) == 1 + 22
    assert [tg.tests[0].name.split("-")[1] for tg in sample] == ["decode", "seq", "heads"]
    assert all(tg in full and vectors._token_heads(tg) <= vectors.SAMPLE_MAX_TOKEN_HEADS for tg in sample)
    cases = {c.id.rsplit("/", 1)[1]: c for c in fresh_cases(PROTOCOL, 5)}
    for tg in sample:
        t = tg.tests[0]
        assert cases[t.name].arrays["coords"].tolist() == [[list(p) for p in row] for row in t.coords]


def test_shapes_option_is_checked():
    with pytest.raises(ValueError, match="shapes"):
        vectors.fresh_groups(Draw(1, PROTOCOL), shapes="all")
    with pytest.raises(ValueError, match="shapes"):
        fresh_cases(PROTOCOL, 1, shapes="most")


def test_batched_decode_expected_values_are_certified():
    proto = catalog.protocol(PROTOCOL)
    total = certify.Certificate(proto.rounding)
    for kind, tg in vectors.shape_matrix(Draw(3, PROTOCOL)):
        if kind == "decode" and len(tg.tests[0].coords) <= 7:
            test_params, inputs = proto.build(f"{PROTOCOL}/fresh-3/{tg.tests[0].name}", dict(tg.params), tg.tests[0])
            params = {**tg.params, **test_params}
            total.add(certify.certify_case(proto, params, inputs, proto.compute(params, inputs, "cpu")))
    assert total.ok and total.certified == 2 * 9 * 3 * vectors.SHAPE_HEAD_DIM


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
    assert {"shape-decode-b64-qwen2-vl", "shape-decode-b64-vit", "shape-seq-1000-vit",
            "shape-heads-64-vit"} <= graded


def test_row_zero_coords_bug_passes_the_catalog_but_not_the_batched_cases():
    catalog_only = run_conformance(coords_of_row_zero, PROTOCOL, dtypes=("float32",), fresh=False, identities=False)
    assert catalog_only.summary()["overall"] == "pass"
    for seed in (1, 2):
        report = run_conformance(coords_of_row_zero, PROTOCOL, seed=seed, dtypes=("float32",), identities=False,
                                 cases=SHAPES)
        failing = [c for c in report.cases if c.verdict == "fail"]
        assert [c.id for c in failing] == [c.id for c in report.cases if "/shape-decode-" in c.id] != []
        for c in failing:
            row = re.match(r"batch row (\d+), token 0 \(patch \(x \d+, y \d+\)\)", c.worst_location)
            assert row and int(row.group(1)) >= 1, c.worst_location
            assert c.diagnoses == [], c.diagnoses  # no wrong name (axes, ladder, CLS) claimed
