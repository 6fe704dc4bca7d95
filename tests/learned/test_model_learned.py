"""Learned absolute tables at a model's configuration (issue 27): reference.learned.model_config.

BERT (512 rows), RoBERTa (514 rows, position ids from padding_idx + 1) and GPT-2 (1024 rows) are
read at their table sizes and widths, and graded across the table up to its last row and one past
it. A RoBERTa port without the padding offset fails at roberta-base-125m and passes at BERT and GPT-2.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from conformance import run_conformance
from reference import zoo
from reference.learned import model_config
from reference.zoo.cases import cases as model_cases
from reference.zoo.plan import plan
from support import assert_config_error

ROOT = Path(__file__).resolve().parents[2]
CORRECT = [ROOT / "examples/learned/gpt2_wpe.py", ROOT / "examples/learned/roberta_position_ids.py"]
NO_OFFSET = ROOT / "examples/learned/buggy/position_offset.py"
NO_WALL = ROOT / "examples/learned/buggy/length_wall_missing.py"
TABLES = {
    "bert-base-uncased": {"num_positions": 512, "d_model": 768, "variant": "absolute", "padding_idx": None},
    "roberta-base-125m": {"num_positions": 514, "d_model": 768, "variant": "roberta", "padding_idx": 1},
    "gpt2-124m": {"num_positions": 1024, "d_model": 768, "variant": "absolute", "padding_idx": None},
}


def _config(name: str) -> dict:
    return copy.deepcopy(zoo.load(name)["config"])


@pytest.mark.parametrize("name", sorted(TABLES))
def test_each_learned_record_reads_as_its_table(name):
    (setting,) = model_config.settings(_config(name))
    assert setting.params == TABLES[name] and setting.notes == ()
    assert list(plan(_config(name))) == ["learned.lookup"]


def test_other_families_records_have_no_learned_table():
    assert {name for name in zoo.names() if model_config.settings(_config(name)) is not None} == set(TABLES)


def test_roberta_default_padding_index_is_said():
    config = _config("roberta-base-125m")
    del config["pad_token_id"]
    (setting,) = model_config.settings(config)
    assert setting.params["padding_idx"] == 1 and "RobertaConfig default" in setting.notes[0]


@pytest.mark.parametrize("name, edit, message", [
    ("bert-base-uncased", lambda c: c.update(position_embedding_type="relative_key"),
     "position_embedding_type: 'relative_key'"),
    ("bert-base-uncased", lambda c: c.pop("max_position_embeddings"), "needs max_position_embeddings"),
    ("gpt2-124m", lambda c: c.update(n_ctx=2048), "n_ctx: 2048 disagrees with n_positions 1024"),
    ("gpt2-124m", lambda c: c.update(n_embd="768"), "n_embd: a positive integer"),
    ("roberta-base-125m", lambda c: c.update(pad_token_id=513), "pad_token_id: 513 leaves no row"),
    ("roberta-base-125m", lambda c: c.update(pad_token_id=-1), "pad_token_id: a row index"),
])
def test_a_field_posref_cannot_read_is_one_error_naming_it(name, edit, message):
    config = _config(name)
    edit(config)
    assert_config_error(config, message)


def test_the_cases_span_the_table_and_its_wall():
    roberta = model_cases(_config("roberta-base-125m"), "roberta-base-125m", 4)["learned.lookup"]
    names = [c.id.rsplit("/", 1)[1] for c in roberta]
    assert names == ["prefill-8", "drawn", "last-row-511", "row-offsets", "left-padded", "wall-512", "wall-one-token"]
    assert [c.params["must_raise"] for c in roberta] == [False] * 5 + [True] * 2
    assert roberta[0].arrays["table"].shape == (514, 768)  # the model's own width
    gpt2 = model_cases(_config("gpt2-124m"), "gpt2-124m", 4)["learned.lookup"]
    assert {"last-row-1023", "wall-1024", "negative-1"} <= {c.id.rsplit("/", 1)[1] for c in gpt2}
    drawn = [model_cases(_config("gpt2-124m"), "gpt2-124m", s)["learned.lookup"][1].arrays["positions"].tolist() for s in (4, 5)]
    assert drawn[0] != drawn[1] and all(8 <= p <= 1023 for p in drawn[0][0])


def _grade(path, model):
    return run_conformance(f"{path}:lookup", "learned.lookup", model=model, seed=5, dtypes=("float32",),
                           identities=False)


def _codes(report) -> set:
    return {d.code for c in report.cases for d in c.diagnoses}


@pytest.mark.parametrize("path", CORRECT, ids=lambda p: p.stem)
@pytest.mark.parametrize("model", sorted(TABLES))
def test_the_correct_examples_pass_at_each_model(path, model):
    report = _grade(path, model)
    assert report.summary()["overall"] == "pass", [(c.id, c.verdict) for c in report.cases]
    assert not any(c.verdict == "skip" for c in report.cases)


def test_roberta_without_the_padding_offset_fails_at_roberta_only():
    report = _grade(NO_OFFSET, "roberta-base-125m")
    assert _codes(report) == {"position-offset", "length-wall-missing"}
    assert {c.id.rsplit("/", 1)[1] for c in report.cases if c.verdict == "fail"} >= {"prefill-8", "last-row-511"}
    for model in ("bert-base-uncased", "gpt2-124m"):  # no offset to miss
        assert _grade(NO_OFFSET, model).summary()["overall"] == "pass"


@pytest.mark.parametrize("model, wall", [("bert-base-uncased", "wall-512"), ("gpt2-124m", "wall-1024")])
def test_a_missing_wall_fails_one_past_the_models_table(model, wall):
    report = _grade(NO_WALL, model)
    failed = {c.id.rsplit("/", 1)[1] for c in report.cases if c.verdict == "fail"}
    assert wall in failed and "last-row-" + str(int(wall.split("-")[1]) - 1) not in failed
    assert _codes(report) == {"length-wall-missing"}
