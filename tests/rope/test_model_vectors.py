"""The zoo's committed cases (issue 27): a certified, seedless group per model in vectors/, graded
under ``--model`` beside the drawn cases, so that a review cites an id no seed changes."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from conformance import run_conformance
from conformance.model import model_cases, resolve
from reference import zoo
from reference.golden import catalog, store
from reference.rope import model_config
from reference.zoo import vectors as zoo_vectors
from reference.zoo.cases import group_name

BUGGY_BASE = "examples/rope/buggy/wrong_base.py:apply"


def _rope_models():
    out = []
    for name in zoo.names():
        try:
            found = model_config.settings(zoo.load(name)["config"])
        except model_config.ConfigError:
            continue  # named by tests/rope/test_model_config.py
        out += [(name, s) for s in found or ()]
    return out


def test_every_model_rope_reads_has_its_committed_group():
    stored = {c.id: c for c in store.iter_cases("rope.apply")}
    models = _rope_models()
    assert len(models) >= 25
    for name, setting in models:
        group = f"rope.apply/{group_name(name, setting.kind)}"
        last = f"{group}/decode-{setting.max_positions - 1}"
        assert last in stored and f"{group}/batched-decode" in stored, group
        case = stored[last]
        assert case.arrays["positions"].tolist() == [[setting.max_positions - 1]]
        assert {k: case.params[k] for k in setting.params} == setting.params
    assert "rope.apply/codellama-7b/decode-16383" in stored  # the citation


def test_the_stored_values_are_the_references_at_the_records_parameters():
    case = store.get_case("rope.apply/phi-3.5-mini/decode-4096-seq4097")
    (setting,) = model_config.settings(zoo.load("phi-3.5-mini")["config"])
    assert case.params["scaling"]["rope_type"] == "longrope" and case.params["seq_len"] == 4097
    out = catalog.protocol("rope.apply").compute(
        {**case.params, **setting.params}, {r: case.arrays[r] for r in ("x", "positions")}, "cpu")
    np.testing.assert_array_equal(np.asarray(out["expected"]), case.arrays["expected"])


def test_model_mode_grades_the_committed_cases_with_every_seed():
    model = resolve("llama-3.1-8b")
    one, drawn_one = model_cases(model, "rope.apply", 1)
    two, drawn_two = model_cases(model, "rope.apply", 2)
    assert [c.id for c in one] == [c.id for c in two] and one
    assert all(np.array_equal(a.arrays["x"], b.arrays["x"]) for a, b in zip(one, two))
    assert not {c.id for c in one} & {c.id for c in drawn_one}
    assert not np.array_equal(drawn_one[0].arrays["x"], drawn_two[0].arrays["x"])


def test_a_config_file_has_no_committed_cases(tmp_path):
    path = tmp_path / "llama-3.1-8b.json"  # a user's file named like a zoo model is not the zoo's
    path.write_text(__import__("json").dumps(zoo.load("llama-3.1-8b")["config"]))
    committed, drawn = model_cases(resolve(config_path=str(path)), "rope.apply", 1)
    assert committed == [] and drawn


def test_a_dropped_base_fails_the_cited_case():
    report = run_conformance(BUGGY_BASE, "rope.apply", model="codellama-7b", seed=3, dtypes=("float32",),
                             identities=False, cases="*/decode-16383")
    (case,) = report.cases
    assert case.id == "rope.apply/codellama-7b/decode-16383" and case.verdict == "fail"
    assert {d.code for d in case.diagnoses} == {"wrong-base"}
    assert any("committed" in n for n in report.notes)


def test_a_catalog_group_of_the_same_name_takes_the_tests_it_lacks():
    groups = {g.key: g for g in catalog.all_groups()}
    gptj = [t.name for tg in groups["rope.apply/gpt-j-6b"].test_groups for t in tg.tests]
    assert gptj[:5] == ["prefill-8", "decode-2047", "row-offsets", "around-2p11", "around-2p24"]
    assert gptj[5:] == ["batched-decode"]
    (committed,) = [g for g in zoo_vectors.groups("rope") if g.key == "rope.apply/gpt-j-6b"]
    other = replace(committed, test_groups=(replace(committed.test_groups[0],
                                                    params={**committed.test_groups[0].params, "base": 1e6}),))
    with pytest.raises(ValueError, match="different parameters"):
        zoo_vectors.merge([groups["rope.apply/gpt-j-6b"]], [other])
