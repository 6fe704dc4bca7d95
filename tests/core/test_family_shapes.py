"""The serving shape matrix of every family that has one (issue 14; one test over the families,
issue 26): what each matrix holds, the default sample and ``shapes="full"``, the correct examples
on all of it, and an implementation that gets batch row 0 right and the other rows of a batch of
one-token rows wrong, which passes the catalog and fails the batched cases.

What differs between families is data, in FAMILIES below: the protocol, how a test's rows of
tokens are read (positions, (x, y) coordinates, the t stream of (t, h, w)), the farthest position
a row may sit at, the variants the cases are named after, and the family's row-zero bug with what
its failure looks like. The rest is read from what each family declares: its vectors module's
``shape_matrix``, ``SAMPLE_KINDS``, ``SAMPLE_MAX_TOKEN_HEADS`` and protocol's ``fresh``. RoPE's
tensor-layout and in-place cases, its black-box decode check and its diagnosis mutants are
tests/rope/test_shapes.py's.

``batch-row-zero-only`` is RoPE's code (conformance/rope/diagnosis.py), also named by Gaussian
RoPE and xPos; the other families' diagnoses do not look for it, so for them the test checks the
failure, that no other diagnosis is claimed (``diagnoses == ()``), and the worst location (a batch
row other than 0)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

pytest.importorskip("torch")

from conformance import run_conformance  # noqa: E402
from conformance.loader import load_target  # noqa: E402
from reference import gaussian_rope  # noqa: E402
from reference.golden import catalog, certify, shapes as serving  # noqa: E402
from reference.golden.fresh import Draw, fresh_cases  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
HEAD_COUNTS = {1, 3, 8, 32, 40, 64}


def example(path: str) -> str:
    """``examples/<path>`` as a conform target ("file.py:function")."""
    return f"{EXAMPLES / path}"


@lru_cache(maxsize=None)
def correct(target: str):
    return load_target(example(target))


# ------------------------------------------------------------------------------------------
# Each family's row-zero bug: right at batch 1, wrong on the other rows of a batch of one-token
# rows (a fused kernel launched over row 0 only, or row 0's positions broadcast to the batch).


def xpos_row_zero_only(q, k, positions, spec):
    """A fused kernel that, with one token per row, launches over row 0 only: rows 1.. come back
    as they went in."""
    qo, ko = correct("xpos/torchscale_style.py:apply")(q, k, positions, spec)
    if q.shape[1] == 1 and q.shape[0] > 1:
        qo, ko = qo.clone(), ko.clone()
        qo[1:], ko[1:] = q[1:], k[1:]
    return qo, ko


def rope2d_coords_of_row_zero(x, coords, spec):
    """A single-patch path that broadcasts row 0's (x, y) to the batch."""
    if x.shape[1] == 1 and x.shape[0] > 1:
        coords = coords[:1].expand_as(coords)
    return correct("rope2d/rope_vit.py:apply")(x, coords, spec)


def mrope_positions_of_row_zero(x, positions, spec):
    """A decode path that broadcasts row 0's (t, h, w) to the batch when every row holds one token."""
    if x.shape[1] == 1 and x.shape[0] > 1:
        positions = positions[:, :1].expand_as(positions)
    return correct("mrope/qwen_vl.py:apply")(x, positions, spec)


def learned_positions_of_row_zero(x, positions, table, spec):
    """A decode path that broadcasts row 0's position to the batch when every row holds one token."""
    if x.shape[1] == 1 and x.shape[0] > 1:
        positions = positions[:1].expand_as(positions)
    return correct("learned/gpt2_wpe.py:lookup")(x, positions, table, spec)


def nope_row_zero_everywhere(x, positions, spec):
    """With one token per row, every row gets row 0's values (a stride-0 batch)."""
    if x.shape[1] == 1 and x.shape[0] > 1:
        return x[:1].expand_as(x).clone()
    return correct("nope/llama4_style.py:apply")(x, positions, spec)


# ------------------------------------------------------------------------------------------
# Per-family checks beyond the common ones (each says what its family's matrix adds)


def gaussian_far_rows_stay_visible(sizes):
    """The shape kernel keeps far rows above underflow: a row left unrotated must show at 131071
    (with seed 002's kernel K is 0 there)."""
    k = gaussian_rope.kernel(np.array([0, 65536, 131071]), catalog.family_module("gaussian_rope.apply").SHAPE_KERNEL,
                             mode="golden")
    assert k[0] == 1.0 and k[-1] > 0.05
    assert gaussian_rope.kernel(np.array([131071]),
                                catalog.family_module("gaussian_rope.apply").DOCUMENT_KERNEL)[0] == 0.0


def xpos_positions_are_float16_safe(params, test):
    assert max(max(r) for r in test.positions) <= catalog.family_module("xpos.apply").FAR_POSITION == 4095, test.name


def learned_positions_are_inside_the_table(params, test):
    last = catalog.family_module("learned.lookup")._last_position(params)
    assert all(0 <= p <= last for row in test.positions for p in row) and not test.must_raise, test.name
    if test.name.startswith("shape-seq-"):
        assert test.positions[0] != test.positions[1], test.name


def rope2d_patches_are_distinct_and_cls_tokens_lead_the_vit_prefills(params, test):
    pts = [p for row in test.coords for p in row]
    far = catalog.family_module("rope2d.apply").FAR_COORD
    assert all(0 <= c <= far for p in pts[params["cls_tokens"]:] for c in p), test.name
    assert len(set(pts)) == len(pts), test.name
    if test.name.startswith("shape-decode-"):
        assert params["cls_tokens"] == 0, test.name
    if test.name.startswith("shape-seq-") and test.name.endswith("-vit"):
        assert params["cls_tokens"] == 1 and pts[0] == (-1, -1), test.name


def mrope_rows_have_their_own_t_h_w(params, test):
    assert sum(params["mrope_section"]) == params["rotary_dim"] // 2 == 8, test.name
    if test.name.startswith("shape-decode-"):
        rows = mrope_rows(test)
        assert len({r[0] for r in rows}) == len(rows) and rows[1][2] == 131071, test.name
        assert all(tt < hh < ww for tt, hh, ww in rows if (tt, hh, ww) != (0, 0, 0)), test.name
        assert len(rows) == 2 or rows[-1] == (0, 0, 0), test.name


def mrope_rows(test):
    """(t, h, w) of each row's one token (the three streams zipped)."""
    return list(zip(*(tuple(r[0] for r in stream) for stream in test.positions)))


def rope_matrix_extras(sizes):
    """Partial rotary at every catalog head size, and a long prefill."""
    partial = {(d, r) for kind, (_, _, _, d, r) in sizes.items() if kind.startswith("shape-dim-")}
    assert {d for d, _ in partial} == {64, 80, 96, 128, 256} and all(r < d for d, r in partial)
    assert any(s == 8192 for _, s, *_ in sizes.values())


def nope_matrix_extras(sizes):
    assert [s for name, (_, s, *_) in sizes.items() if name.startswith("shape-prefill-")] == [8192]


def learned_matrix_extras(sizes):
    decode = [b for name, (b, *_) in sizes.items() if name.startswith("shape-decode-")]
    assert sorted(decode) == [2, 2, 7, 7, 64, 64]  # GPT-2's and RoBERTa's tables


def first_tokens(test):
    return [r[0] for r in test.positions]


@dataclass(frozen=True)
class Family:
    """What one family's shape tests need beyond its declarations.

    rows          test -> its rows of tokens [b][s] (for the sizes)
    width         (params, test) -> the size of the axis an implementation could confuse with the
                  batch or sequence (heads; a lookup's d_model)
    decode_rows   test -> one item per batch row of a decode case (position, (x, y), (t, h, w))
    far           (params) -> the farthest item a decode batch must hold; origin: the nearest
    """

    protocol: str
    rows: Callable = lambda test: test.positions
    width: Callable = lambda params, test: test.heads
    widths: frozenset = frozenset(HEAD_COUNTS)
    width_kind: str = "heads"
    seqs: frozenset = frozenset(serving.TILE_LENGTHS)
    variants: frozenset | None = None  # the names' last part, where the cases are named after one
    matrix_extras: Callable | None = None
    decode_rows: Callable = first_tokens
    far: Callable = lambda params: serving.FAR_POSITION
    origin: object = 0
    row_seeds: tuple = (1, 2)
    row_extras: Callable | None = None
    # the sample: how many drawn cases come before the matrix, its kinds, how many the full matrix
    # adds, and how a sampled case's built input matches its test
    drawn: Callable = lambda vectors: 1
    sample_kinds: tuple = ("decode", "seq", "heads")
    full: int = 22
    sampled_input: Callable | None = None
    # grading: the correct examples, the certified decode outputs per (row, head) * head_dim
    examples: tuple = ()
    head_dim: int | None = None
    default_sample: bool = True
    full_cases: str | None = None  # cases= of the full run (None: the catalog too)
    full_count: int | None = None
    full_graded: frozenset = frozenset()
    full_slow: bool = False
    # the row-zero bug
    bug: object = None  # a function, or an example path
    bug_catalog_fails: tuple = ()
    bug_runs: tuple = ((1, "sample"), (2, "sample"))  # (seed, shapes)
    bug_fails: frozenset | None = None  # None: exactly the run's shape-decode cases (some)
    bug_location: str = r"batch row (\d+), position \d+ \(token 0\)"  # the worst location (re.match)
    bug_codes: tuple = ()


def x_shape(role, head_dim):
    def check(case, group, test):
        assert case.arrays[role].shape == (len(test.positions), len(test.positions[0]), test.heads, head_dim)
    return check


def rope2d_coords_as_drawn(case, group, test):
    assert case.arrays["coords"].tolist() == [[list(p) for p in row] for row in test.coords]


def mrope_positions_shape(case, group, test):
    assert case.arrays["positions"].shape == (3, len(test.positions[0]), len(test.positions[0][0]))


def learned_x_shape(case, group, test):
    assert case.arrays["x"].shape == (len(test.positions), len(test.positions[0]), group.params["d_model"])


FAMILIES = {
    "gaussian_rope": Family(
        "gaussian_rope.apply", variants=frozenset({"half", "interleaved"}), matrix_extras=gaussian_far_rows_stay_visible,
        sampled_input=x_shape("x", 8), examples=("gaussian_rope/gaussian_rope_torch.py:apply",), head_dim=8,
        full_graded=frozenset({"shape-decode-b64-half", "shape-decode-b64-interleaved",
                               "shape-seq-1000-interleaved", "shape-heads-64-interleaved"}),
        bug="gaussian_rope/buggy/batch_row_zero_only.py:apply", bug_codes=("batch-row-zero-only",)),
    "xpos": Family(
        "xpos.apply", variants=frozenset({"half", "interleaved"}), far=lambda params: 4095,
        row_extras=xpos_positions_are_float16_safe, sampled_input=x_shape("q", 8),
        examples=("xpos/torchscale_style.py:apply",), head_dim=8,
        full_graded=frozenset({"shape-decode-b64-interleaved", "shape-decode-b64-half", "shape-seq-1000-half",
                               "shape-heads-64-half"}),
        full_slow=True,  # about 5 s: 45 000 golden values (q and k) settled in mpmath, then graded
        bug=xpos_row_zero_only, bug_codes=("batch-row-zero-only",),
        bug_location=r"(?:query|key), batch row (\d+), position \d+ \(token 0\)"),
    "rope2d": Family(
        "rope2d.apply", rows=lambda test: test.coords, variants=frozenset({"vl", "vit"}),  # qwen2-vl and vit
        decode_rows=lambda test: [r[0] for r in test.coords], far=lambda params: (4095, 4095), origin=(0, 0),
        row_extras=rope2d_patches_are_distinct_and_cls_tokens_lead_the_vit_prefills,
        sampled_input=rope2d_coords_as_drawn, examples=("rope2d/rope_vit.py:apply",), head_dim=16,
        full_graded=frozenset({"shape-decode-b64-qwen2-vl", "shape-decode-b64-vit", "shape-seq-1000-vit",
                               "shape-heads-64-vit"}),
        bug=rope2d_coords_of_row_zero, bug_location=r"batch row (\d+), token 0 \(patch \(x \d+, y \d+\)\)"),
    "mrope": Family(
        "mrope.apply", rows=lambda test: test.positions[0], variants=frozenset({"qwen2", "qwen3"}),
        decode_rows=mrope_rows, far=lambda params: None, origin=(0, 0, 0),  # row 1's w is far (row_extras)
        row_extras=mrope_rows_have_their_own_t_h_w,
        drawn=lambda vectors: len(vectors.MODELS),  # one drawn case per model configuration
        sampled_input=mrope_positions_shape, examples=("mrope/qwen_vl.py:apply",), head_dim=16,
        full_graded=frozenset({"shape-decode-b64-qwen2", "shape-decode-b64-qwen3", "shape-seq-1000-qwen3",
                               "shape-heads-64-qwen3"}),
        bug=mrope_positions_of_row_zero, bug_location=r"batch row (\d+), token 0 \(t \d+, h \d+, w \d+\)"),
    "learned": Family(
        "learned.lookup", width=lambda params, test: params["d_model"], widths=None, width_kind="width",
        matrix_extras=learned_matrix_extras,
        far=lambda params: catalog.family_module("learned.lookup")._last_position(params),
        row_extras=learned_positions_are_inside_the_table, sample_kinds=("decode", "seq", "width"), full=21,
        sampled_input=learned_x_shape, examples=("learned/gpt2_wpe.py:lookup", "learned/roberta_position_ids.py:lookup"),
        default_sample=False, full_cases="learned.lookup/fresh-*/shape-*", full_count=21,
        bug=learned_positions_of_row_zero, bug_runs=((3, "full"),),
        bug_fails=frozenset({f"shape-decode-b{b}-{m}" for b in (2, 7, 64) for m in ("gpt2", "roberta-base")}
                            | {"shape-seq-1-gpt2"})),  # seq-1: two rows of one token
    "nope": Family(
        "nope.apply", matrix_extras=nope_matrix_extras, full=20, sampled_input=x_shape("x", 128),
        examples=("nope/llama4_style.py:apply",), default_sample=False, full_cases="nope.apply/fresh-*/shape-*",
        full_count=20, bug=nope_row_zero_everywhere, bug_catalog_fails=("nope.apply/nope-layer-d128/decode-rows",),
        bug_runs=((3, "full"),), bug_fails=frozenset({"shape-decode-b2", "shape-decode-b7", "shape-decode-b64",
                                                      "shape-seq-1"})),
    "rope": Family(
        "rope.apply", seqs=frozenset(serving.TILE_LENGTHS) | frozenset(serving.TAIL_LENGTHS),
        variants=frozenset({"half", "interleaved"}), matrix_extras=rope_matrix_extras, row_seeds=(11,),
        examples=("rope/hf_rotate_half.py:apply",), default_sample=False),
}
SAMPLED = [name for name, f in FAMILIES.items() if f.sampled_input]
CERTIFIED = [name for name, f in FAMILIES.items() if f.head_dim]
DEFAULT_SAMPLE = [name for name, f in FAMILIES.items() if f.default_sample]
FULL = [pytest.param(name, marks=pytest.mark.slow) if f.full_slow else name
        for name, f in FAMILIES.items() if f.full_graded or f.full_count]
BUGGY = [name for name, f in FAMILIES.items() if f.bug]


def vectors_of(family: Family):
    return catalog.family_module(family.protocol)


def shapes_glob(family: Family) -> str:
    return f"{family.protocol}/fresh-*/shape-*"


def matrix(family: Family, seed: int):
    return [(kind, tg.params, tg.tests[0]) for kind, tg in vectors_of(family).shape_matrix(Draw(seed, family.protocol))]


def test_every_family_with_a_shape_matrix_is_here():
    """A family that declares a shape matrix is held to these tests (add it to FAMILIES)."""
    declared = {name for name in catalog.protocols() if hasattr(catalog.family_module(name), "shape_matrix")}
    assert {catalog.family_module(name).__name__ for name in declared} == \
        {vectors_of(f).__name__ for f in FAMILIES.values()}


# ------------------------------------------------------------------------------------------
# What each matrix holds


@pytest.mark.parametrize("name", FAMILIES)
def test_matrix_covers_the_serving_shapes(name):
    family = FAMILIES[name]
    cases = matrix(family, 7)
    sizes = {t.name: (len(family.rows(t)), len(family.rows(t)[0]), family.width(p, t), p.get("head_dim"),
                      p.get("rotary_dim")) for _, p, t in cases}
    kinds = {t.name: kind for kind, _, t in cases}
    decode = [(b, s) for n, (b, s, *_) in sizes.items() if kinds[n] == "decode"]
    assert {b for b, _ in decode} == set(serving.DECODE_BATCHES) == {2, 7, 64} and {s for _, s in decode} == {1}
    assert {s for n, (_, s, *_) in sizes.items() if kinds[n].startswith("seq")} == family.seqs
    widths = {w for n, (_, _, w, *_) in sizes.items() if kinds[n] == family.width_kind}
    assert widths == (family.widths if family.widths is not None else set(vectors_of(family).WIDTHS))
    if family.variants is not None:
        assert {n.rsplit("-", 1)[1] for n in sizes} == family.variants
    if family.matrix_extras:
        family.matrix_extras(sizes)
    # no two axes of the same size, where both exist (a packed thd case has one row of every token)
    for n, (b, s, h, *_) in sizes.items():
        if "-thd-" not in n:
            assert (h != s or s == 1) and (h != b or h == 1) and (s != b or s == 1), n


@pytest.mark.parametrize("name", FAMILIES)
def test_decode_rows_are_distinct_and_far_apart(name):
    """Each row of a batched decode step at its own position; row 0 never at the origin (where a
    rotation is the identity), the farthest position in some row and, past two rows, the origin."""
    family = FAMILIES[name]
    for seed in family.row_seeds:
        for kind, params, t in matrix(family, seed):
            if family.row_extras:
                family.row_extras(params, t)
            if kind != "decode":
                continue
            rows, far = family.decode_rows(t), family.far(params)
            assert len(set(rows)) == len(rows) and rows[0] != family.origin, t.name
            assert far is None or far in rows, t.name
            assert len(rows) == 2 or family.origin in rows, t.name


# ------------------------------------------------------------------------------------------
# The default sample and ``shapes="full"``


@pytest.mark.parametrize("name", SAMPLED)
def test_sample_is_a_few_cheap_cases_of_the_full_matrix(name):
    """The same draws give the same cases: the sample's are the full matrix's, one of each kind,
    each of at most SAMPLE_MAX_TOKEN_HEADS (token, head)s where the family bounds it."""
    family, vectors = FAMILIES[name], vectors_of(FAMILIES[name])
    fresh = catalog.protocol(family.protocol).fresh
    drawn = family.drawn(vectors)
    sample = fresh(Draw(5, family.protocol), shapes="sample")[drawn:]
    full = fresh(Draw(5, family.protocol), shapes="full")
    assert len(sample) == len(vectors.SAMPLE_KINDS) == len(family.sample_kinds) and len(full) == drawn + family.full
    assert tuple(tg.tests[0].name.split("-")[1] for tg in sample) == family.sample_kinds
    assert all(tg in full for tg in sample)
    if hasattr(vectors, "SAMPLE_MAX_TOKEN_HEADS"):
        assert all(vectors._token_heads(tg) <= vectors.SAMPLE_MAX_TOKEN_HEADS for tg in sample)
    cases = {c.id.rsplit("/", 1)[1]: c for c in fresh_cases(family.protocol, 5)}
    for tg in sample:
        family.sampled_input(cases[tg.tests[0].name], tg, tg.tests[0])


@pytest.mark.parametrize("name", FAMILIES)
def test_shapes_option_is_checked(name):
    family = FAMILIES[name]
    with pytest.raises(ValueError, match="shapes"):
        catalog.protocol(family.protocol).fresh(Draw(1, family.protocol), shapes="all")
    with pytest.raises(ValueError, match="shapes"):
        fresh_cases(family.protocol, 1, shapes="most")
    with pytest.raises(ValueError, match="shapes"):
        run_conformance(example(family.examples[0]), family.protocol, shapes="most")


@pytest.mark.parametrize("name", CERTIFIED)
def test_batched_decode_expected_values_are_certified(name):
    """fresh.py computes them with the golden reference; mpmath agrees to the last bit: 2 variants
    x (2 + 7 rows) x 3 heads x head_dim values per output."""
    family = FAMILIES[name]
    proto = catalog.protocol(family.protocol)
    total = certify.Certificate(proto.rounding)
    for kind, tg in vectors_of(family).shape_matrix(Draw(3, family.protocol)):
        if kind == "decode" and len(family.rows(tg.tests[0])) <= 7:
            test_params, inputs = proto.build(f"{family.protocol}/fresh-3/{tg.tests[0].name}", dict(tg.params),
                                              tg.tests[0])
            params = {**tg.params, **test_params}
            total.add(certify.certify_case(proto, params, inputs, proto.compute(params, inputs, "cpu")))
    assert total.ok and total.certified == len(proto.outputs) * 2 * 9 * 3 * family.head_dim


# ------------------------------------------------------------------------------------------
# Grading: the correct examples, the row-zero bug


@pytest.mark.parametrize("name", DEFAULT_SAMPLE)
def test_correct_example_passes_the_default_sample(name):
    family = FAMILIES[name]
    report = run_conformance(example(family.examples[0]), family.protocol, seed=4, dtypes=("float32", "bfloat16"),
                             identities=False, cases=shapes_glob(family))
    assert len(report.cases) == 2 * 3
    assert report.summary()["overall"] == "pass", [(c.id, c.dtype, c.verdict) for c in report.cases]


@pytest.mark.parametrize("name", FULL)
def test_correct_examples_pass_the_full_matrix(name):
    """About 2 to 3 s a family: up to 45 000 golden values settled in mpmath, then graded."""
    family = FAMILIES[name]
    for target in family.examples:
        report = run_conformance(example(target), family.protocol, shapes="full", seed=9, dtypes=("float32",),
                                 identities=False, cases=family.full_cases)
        assert report.summary()["overall"] == "pass", [(c.id, c.verdict) for c in report.cases if c.verdict == "fail"]
        if family.full_count is not None:
            assert len(report.cases) == family.full_count
        graded = {c.id.rsplit("/", 1)[1] for c in report.cases if c.verdict in ("pass", "acceptable")}
        assert family.full_graded <= graded


@pytest.mark.parametrize("name", BUGGY)
def test_row_zero_bug_passes_the_catalog_but_not_the_batched_decode_cases(name):
    family = FAMILIES[name]
    bug = example(family.bug) if isinstance(family.bug, str) else family.bug
    catalog_only = run_conformance(bug, family.protocol, dtypes=("float32",), fresh=False, identities=False)
    assert tuple(c.id for c in catalog_only.cases if c.verdict == "fail") == family.bug_catalog_fails
    assert family.bug_catalog_fails or catalog_only.summary()["overall"] == "pass"
    for seed, shapes in family.bug_runs:
        report = run_conformance(bug, family.protocol, seed=seed, shapes=shapes, dtypes=("float32",),
                                 identities=False, cases=shapes_glob(family))
        failing = [c for c in report.cases if c.verdict == "fail"]
        if family.bug_fails is None:
            assert [c.id for c in failing] == [c.id for c in report.cases if "/shape-decode-" in c.id] != []
        else:
            assert {c.id.rsplit("/", 1)[1] for c in failing} == family.bug_fails
        for c in failing:
            row = re.match(family.bug_location, c.worst_location)
            assert row and int(row.group(1)) >= 1, c.worst_location
            assert tuple(d.code for d in c.diagnoses) == family.bug_codes, (c.id, c.diagnoses)
