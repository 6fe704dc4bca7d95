"""The serving shape matrix of gaussian_rope.apply's fresh cases (issue 14): what it holds, the
default sample and ``shapes="full"``, the correct example on all of it, and a fused kernel that
rotates only batch row 0 at decode, which passes the catalog and fails the matrix with
``batch-row-zero-only``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from conformance import run_conformance  # noqa: E402
from reference import gaussian_rope  # noqa: E402
from reference.golden import catalog, certify  # noqa: E402
from reference.golden.fresh import Draw, fresh_cases  # noqa: E402
from reference.gaussian_rope import vectors  # noqa: E402
from reference.rope import vectors as rope_vectors  # noqa: E402

PROTOCOL = "gaussian_rope.apply"
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = f"{ROOT / 'examples' / 'gaussian_rope' / 'gaussian_rope_torch.py'}:apply"
BUG = f"{ROOT / 'examples' / 'gaussian_rope' / 'buggy' / 'batch_row_zero_only.py'}:apply"
SHAPES = f"{PROTOCOL}/fresh-*/shape-*"


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


def test_decode_rows_are_distinct_and_far_apart():
    for seed in (1, 2):
        for kind, _, t in matrix_tests(seed):
            if kind == "decode":
                rows = [r[0] for r in t.positions]
                assert len(set(rows)) == len(rows) and rows[0] != 0 and 131071 in rows, t.name
                assert len(rows) == 2 or 0 in rows, t.name


def test_the_shape_kernel_keeps_far_rows_above_underflow():
    """A row left unrotated must show at 131071: with seed 002's kernel K is 0 there."""
    k = gaussian_rope.kernel(np.array([0, 65536, 131071]), vectors.SHAPE_KERNEL, mode="golden")
    assert k[0] == 1.0 and k[-1] > 0.05
    assert gaussian_rope.kernel(np.array([131071]), vectors.DOCUMENT_KERNEL)[0] == 0.0


def test_sample_is_a_few_cheap_cases_of_the_full_matrix():
    """The same draws give the same cases: the sample's are the full matrix's, at most a few
    hundred (token, head)s each (the golden values are settled in mpmath)."""
    sample = vectors.fresh_groups(Draw(5, PROTOCOL), shapes="sample")[1:]
    full = vectors.fresh_groups(Draw(5, PROTOCOL), shapes="full")
    assert len(sample) == len(vectors.SAMPLE_KINDS) == 3 and len(full) == 1 + 22
    assert [tg.tests[0].name.split("-")[1] for tg in sample] == ["decode", "seq", "heads"]
    assert all(tg in full and vectors._token_heads(tg) <= vectors.SAMPLE_MAX_TOKEN_HEADS for tg in sample)
    cases = {c.id.rsplit("/", 1)[1]: c for c in fresh_cases(PROTOCOL, 5)}
    for tg in sample:
        t = tg.tests[0]
        assert cases[t.name].arrays["x"].shape == (len(t.positions), len(t.positions[0]), t.heads, 8)


def test_shapes_option_is_checked():
    with pytest.raises(ValueError, match="shapes"):
        vectors.fresh_groups(Draw(1, PROTOCOL), shapes="all")
    with pytest.raises(ValueError, match="shapes"):
        fresh_cases(PROTOCOL, 1, shapes="most")


def test_batched_decode_expected_values_are_certified():
    """fresh.py computes them with the golden reference; mpmath agrees to the last bit."""
    proto = catalog.protocol(PROTOCOL)
    total = certify.Certificate(proto.rounding)
    for kind, tg in vectors.shape_matrix(Draw(3, PROTOCOL)):
        if kind == "decode" and len(tg.tests[0].positions) <= 7:
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
    """About 2 s: 22 000 golden values settled in mpmath, then graded."""
    report = run_conformance(EXAMPLE, PROTOCOL, shapes="full", seed=9, dtypes=("float32",), identities=False)
    assert report.summary()["overall"] == "pass", [(c.id, c.verdict) for c in report.cases if c.verdict == "fail"]
    graded = {c.id.rsplit("/", 1)[1] for c in report.cases if c.verdict in ("pass", "acceptable")}
    assert {"shape-decode-b64-half", "shape-decode-b64-interleaved", "shape-seq-1000-interleaved",
            "shape-heads-64-interleaved"} <= graded


def test_batch_row_zero_bug_passes_the_catalog_but_not_the_batched_decode_cases():
    catalog_only = run_conformance(BUG, PROTOCOL, dtypes=("float32",), fresh=False, identities=False)
    assert catalog_only.summary()["overall"] == "pass"
    for seed in (1, 2):
        report = run_conformance(BUG, PROTOCOL, seed=seed, dtypes=("float32",), identities=False, cases=SHAPES)
        failing = [c for c in report.cases if c.verdict == "fail"]
        assert [c.id for c in failing] == [c.id for c in report.cases if "/shape-decode-" in c.id] != []
        for c in failing:
            assert [d.code for d in c.diagnoses] == ["batch-row-zero-only"], c.id
            assert c.worst_location.startswith("batch row ") and not c.worst_location.startswith("batch row 0,")
