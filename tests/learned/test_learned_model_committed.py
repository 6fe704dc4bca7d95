"""learned.lookup's committed cases per zoo model (issue 27): BERT, RoBERTa and GPT-2 at their own
tables (rows and 768 columns), the table named by its seed and not stored
(reference.golden.seeded), graded first by ``--model``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conformance import run_conformance
from conformance.model import model_cases, resolve
from reference import zoo
from reference.golden import catalog, store
from reference.golden.inputs import representable_inputs
from reference.learned import model_config
from reference.learned.vectors import table_of
from reference.zoo import vectors as zoo_vectors

ROOT = Path(__file__).resolve().parents[2]
MODELS = ("bert-base-uncased", "gpt2-124m", "roberta-base-125m")
PROTO = catalog.protocol("learned.lookup")


def _committed(name):
    return [c for c in store.iter_cases("learned.lookup") if c.group == name]


@pytest.mark.parametrize("name", MODELS)
def test_every_learned_model_has_its_committed_group_at_its_own_table(name):
    (setting,) = model_config.settings(zoo.load(name)["config"])
    cases = _committed(name)
    last = setting.params["num_positions"] - 1 - (2 if setting.params["variant"] == "roberta" else 0)
    assert {c.test for c in cases} >= {"prefill-8", f"last-row-{last}", "row-offsets", f"wall-{last + 1}",
                                       "wall-one-token"}
    assert "drawn" not in {c.test for c in cases}  # the seed's draw stays in --model's drawn cases
    for case in cases:
        assert {k: case.params[k] for k in setting.params} == setting.params  # the model's 768 columns
        assert case.arrays["table"].shape == (0, 768)  # nothing stored: named by its seed
        assert case.params["table_seed"] == case.id
        table = table_of(case.params, case.arrays["table"])
        assert table.shape == (setting.params["num_positions"], 768)
        # The very table a stored case of this id would hold (reference.golden.inputs' derivation).
        np.testing.assert_array_equal(table, representable_inputs(case.id, table.shape, "table"))


def test_the_stored_values_are_the_lookup_of_the_derived_table():
    case = store.get_case("learned.lookup/gpt2-124m/last-row-1023")
    table = table_of(case.params, case.arrays["table"])
    np.testing.assert_array_equal(case.arrays["expected"], case.arrays["x"] + table[1023])
    out = PROTO.compute(case.params, {r: case.arrays[r] for r in PROTO.inputs}, "numpy")["expected"]
    np.testing.assert_array_equal(out, case.arrays["expected"])


@pytest.mark.parametrize("edit, message", [
    (lambda p: p.update(table_sha256="0" * 64), "table_sha256: table_seed .* no longer derives the certified table"),
    (lambda p: p.update(table_seed=p["table_seed"] + "x"), "table_sha256: table_seed .* no longer derives the certified table"),
    (lambda p: p.update(table_seed=""), "table_seed: a non-empty string"),
])
def test_a_seed_or_digest_that_does_not_give_the_certified_table_is_refused(edit, message):
    case = store.get_case("learned.lookup/bert-base-uncased/prefill-8")
    params = dict(case.params)
    edit(params)
    with pytest.raises(ValueError, match=message):
        table_of(params, case.arrays["table"])
    with pytest.raises(ValueError, match="a seeded case stores no table"):
        table_of(case.params, np.zeros((512, 768)))


def test_the_schema_ties_the_seed_to_its_digest():
    from reference.golden.verify import _errors, _validator_for

    case = store.get_case("learned.lookup/roberta-base-125m/left-padded")
    validator = _validator_for(PROTO.params_schema)
    assert _errors(validator, dict(case.params)) == []
    for drop in ("table_seed", "table_sha256"):
        params = {k: v for k, v in case.params.items() if k != drop}
        assert _errors(validator, params), drop


def test_a_committed_group_stores_no_table():
    """The three groups together are about 1.2 MB; their tables stored as float64 would be
    (512 + 1024 + 514) x 768 x 8 bytes = 12.6 MB a case."""
    for name in MODELS:
        size = (store.vectors_dir() / "learned.lookup" / f"{name}.npz").stat().st_size
        rows = model_config.settings(zoo.load(name)["config"])[0].params["num_positions"]
        assert size < 600_000 < rows * 768 * 8, name


def test_model_mode_grades_them_first_and_draws_the_rest():
    committed, drawn = model_cases(resolve("gpt2-124m"), "learned.lookup", 3)
    assert {c.test for c in committed} == {"prefill-8", "last-row-1023", "row-offsets", "wall-1024",
                                           "wall-one-token", "negative-1"}
    assert [c.test for c in drawn] == ["drawn"] and drawn[0].arrays["table"].shape == (1024, 768)
    assert {g.key for g in zoo_vectors.groups("learned")} == {f"learned.lookup/{m}" for m in MODELS}


def _grade(adapter, model):
    return run_conformance(adapter, "learned.lookup", model=model, seed=5, dtypes=("float32",), identities=False)


def test_the_correct_example_passes_gpt2_from_its_committed_cases():
    report = _grade(f"{ROOT / 'examples/learned/gpt2_wpe.py'}:lookup", "gpt2-124m")
    assert report.summary()["overall"] == "pass", [(c.id, c.verdict) for c in report.cases]
    graded = {c.id for c in report.cases}
    assert {c.id for c in _committed("gpt2-124m")} <= graded


def _roberta_offset_at_gpt2(x, positions, table, spec):
    """Bug: RoBERTa's padding_idx + 1 = 2 added to a GPT-2 lookup (one embedding helper for both)."""
    import torch.nn.functional as F

    return x + F.embedding(positions + 2, table)


def test_a_lookup_offset_by_two_fails_gpt2s_committed_cases_with_its_code():
    report = _grade(_roberta_offset_at_gpt2, "gpt2-124m")
    verdicts = {c.id.rsplit("/", 1)[1]: (c.verdict, {d.code for d in c.diagnoses}) for c in report.cases}
    assert verdicts["prefill-8"] == ("fail", {"position-offset"})
    # rows 1024 and 1025 do not exist: the last rows read 2 late raise where a value was due
    assert verdicts["last-row-1023"][0] == verdicts["row-offsets"][0] == "error"
    # position -1 reads row 1: a value where the lookup must raise
    assert verdicts["negative-1"] == ("fail", {"length-wall-missing"})
    assert report.summary()["overall"] == "fail"


def test_roberta_without_its_offset_fails_roberta_committed_cases():
    report = _grade(f"{ROOT / 'examples/learned/buggy/position_offset.py'}:lookup", "roberta-base-125m")
    failed = {c.id: {d.code for d in c.diagnoses} for c in report.cases if c.verdict == "fail"}
    assert "position-offset" in failed["learned.lookup/roberta-base-125m/prefill-8"]
    assert "length-wall-missing" in failed["learned.lookup/roberta-base-125m/wall-512"]


def test_an_edited_digest_in_the_metadata_is_an_integrity_failure(tmp_path):
    """The seed and its digest live in the group's JSON, which MANIFEST.json hashes."""
    import shutil

    from reference.golden import verify

    out = tmp_path / "vectors"
    shutil.copytree(store.vectors_dir(), out)
    path = out / "learned.lookup" / "gpt2-124m.json"
    text = path.read_text()
    case = store.get_case("learned.lookup/gpt2-124m/prefill-8")
    path.write_text(text.replace(case.params["table_sha256"], "0" * 64, 1))
    assert any("gpt2-124m.json" in p.path for p in verify.check(out))
