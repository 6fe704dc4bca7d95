"""The learned.lookup golden vectors: certified against mpmath, refused where they must raise,
re-derivable bit for bit, inputs exactly representable, and a catalog that says why each case
exists."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import reference.learned as L
from conformance.core.mutants import round_to
from reference.golden import catalog, store
from reference.learned import vectors

ALL = list(store.iter_cases("learned.lookup"))  # the catalog's and the zoo models' committed cases
CATALOG_GROUPS = {g.name for g in vectors.groups()}
CASES = [c for c in ALL if c.group in CATALOG_GROUPS]
PROTO = catalog.protocol("learned.lookup")


def _table(case):
    """The case's table: stored, or named by its seed (a zoo model's committed case)."""
    return vectors.table_of(case.params, case.arrays["table"])


def test_the_catalog_has_the_real_table_lengths_and_every_kind_of_case():
    assert len(CASES) == sum(len(tg.tests) for g in vectors.groups() for tg in g.test_groups) == 15
    lengths = {c.group: (c.params["num_positions"], c.params["variant"], c.params["padding_idx"]) for c in CASES}
    assert lengths == {"bert-base": (512, "absolute", None), "gpt2": (1024, "absolute", None),
                       "roberta-base": (514, "roberta", 1)}
    flags = {f for c in CASES for f in c.flags}
    assert {"Prefill", "LastRow", "RowOffsets", "LengthWall", "OneTokenPastWall", "NegativePosition",
            "RobertaOffset", "LeftPadding", "PaddingRow"} <= flags
    for group in lengths:
        walls = [c for c in CASES if c.group == group and c.params["must_raise"]]
        values = [c for c in CASES if c.group == group and not c.params["must_raise"]]
        assert walls and values, group
        # the last row is read by some value case of every model
        n = lengths[group][0]
        assert any(n - 1 in L.rows(c.arrays["positions"], n, variant=c.params["variant"],
                                   padding_idx=c.params["padding_idx"]) for c in values), group


def test_every_case_has_a_comment_and_explained_flags():
    for case in CASES:
        assert len(case.comment) > 20 and case.flags, case.id
        assert set(case.flags) <= set(vectors.NOTES), case.id
    for note in vectors.NOTES.values():
        assert note["description"] and all(link.startswith("https://") for link in note["links"])


@pytest.mark.parametrize("case", [c for c in ALL if not c.params["must_raise"]], ids=lambda c: c.id)
def test_value_cases_are_certified_correctly_rounded(case):
    """Every stored value is the exact mpmath sum rounded to float64 (the family's ``exact``)."""
    from reference.learned import oracle

    exact = PROTO.exact(case.params, case.arrays)["expected"]
    assert exact.shape == case.arrays["expected"].shape
    np.testing.assert_array_equal(oracle.rounded(exact), case.arrays["expected"])


@pytest.mark.parametrize("case", [c for c in ALL if c.params["must_raise"]], ids=lambda c: c.id)
def test_wall_cases_store_no_output_and_the_reference_refuses_them(case):
    assert case.arrays["expected"].shape == (0,)
    assert PROTO.exact(case.params, case.arrays)["expected"].shape == (0,)
    for backend in ("cpu", "numpy"):
        with pytest.raises(ValueError, match="^positions: .*length wall"):
            L.lookup(case.arrays["x"], case.arrays["positions"], _table(case),
                     variant=case.params["variant"], padding_idx=case.params["padding_idx"], backend=backend)


@pytest.mark.parametrize("backend", ["cpu", "numpy"])
def test_recomputing_gives_the_stored_bits(backend):
    for case in ALL:
        inputs = {r: case.arrays[r] for r in PROTO.inputs}
        out = PROTO.compute(case.params, inputs, backend)["expected"]
        assert out.shape == case.arrays["expected"].shape
        assert np.array_equal(out.view(np.int64), case.arrays["expected"].view(np.int64)), case.id


def test_inputs_are_exactly_representable_in_bfloat16_and_float16():
    for case in ALL:
        for role in ("x", "table"):
            v = _table(case) if role == "table" else case.arrays[role]
            for dtype in ("bfloat16", "float16"):
                np.testing.assert_array_equal(round_to(v, dtype), v, err_msg=f"{case.id} {role} {dtype}")


def test_the_family_stays_small():
    """The catalog's tables are 8 columns wide; a zoo model's committed group stores no table (it is
    named by its seed) and keeps the model's 768 columns for x and the expected values only."""
    root = store.vectors_dir() / "learned.lookup"
    assert sum(p.stat().st_size for p in root.iterdir() if p.stem in CATALOG_GROUPS) < 800_000
    committed = [p for p in root.glob("*.npz") if p.stem not in CATALOG_GROUPS]
    assert len(committed) == 3 and all(p.stat().st_size < 600_000 for p in committed)


def test_build_refuses_a_case_whose_must_raise_disagrees_with_the_reference():
    group = vectors.groups()[0]
    tg = group.test_groups[0]
    value_case = next(t for t in tg.tests if not t.must_raise)
    wall_case = next(t for t in tg.tests if t.must_raise)
    for test in (replace(value_case, must_raise=True), replace(wall_case, must_raise=False)):
        with pytest.raises(ValueError, match="must_raise"):
            vectors.build_lookup(f"{group.key}/{test.name}", dict(tg.params), test)
    params = {**tg.params, "must_raise": True}
    _, inputs = vectors.build_lookup(f"{group.key}/{value_case.name}", dict(tg.params), value_case)
    with pytest.raises(ValueError, match="must_raise"):
        vectors.compute_lookup(params, inputs, "numpy")
