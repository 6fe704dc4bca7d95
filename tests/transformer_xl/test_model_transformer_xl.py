"""Transformer-XL at a model's configuration (issue 27): reference.sinusoidal.model_config's
reading of a ``transfo-xl`` config (the table it yields is graded by the sinusoidal family).

transfo-xl-wt103's relative encoding reads a sinusoidal table R at d_model 1024 over the
distances klen - 1 .. 0 clamped at clamp_len 1000: graded as sinusoidal.table up to distance 1000.
The paper's PositionalEmbedding passes there; the paper's Transformer layout (interleaved) and
tensor2tensor's exponent fail. The scores themselves, transformer_xl.score at the model's full
shape, are tests/transformer_xl/test_model_score.py's.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from conformance import run_conformance
from reference import zoo
from reference.sinusoidal import model_config
from reference.zoo.cases import cases as model_cases
from reference.zoo.plan import plan
from support import assert_config_error

ROOT = Path(__file__).resolve().parents[2]
R_TABLE = ROOT / "examples/transformer_xl/positional_embedding.py"
NAME = "transfo-xl-wt103"


def _config() -> dict:
    return copy.deepcopy(zoo.load(NAME)["config"])


def test_the_record_reads_as_its_table_up_to_clamp_len():
    (setting,) = model_config.settings(_config())
    assert setting.params == {"d_model": 1024, "layout": "concatenated", "exponent": "2i/d", "base": 10000.0,
                              "dims": 1}
    assert setting.max_position == 1000 and setting.notes == ("largest distance 1000: clamp_len 1000",)
    assert list(plan(_config())) == ["sinusoidal.table", "transformer_xl.score"]


def test_without_a_clamp_the_segment_and_memory_bound_the_distances():
    config = _config()
    config["clamp_len"] = 0  # mem_transformer.py: clamp only when clamp_len > 0
    (setting,) = model_config.settings(config)
    assert setting.max_position == 128 + 1600 - 1 and "clamps nothing" in setting.notes[0]


@pytest.mark.parametrize("edit, message", [
    (lambda c: c.update(attn_type=2), "attn_type: 2: only 0"),
    (lambda c: c.update(d_model=1023), "d_model: 1023 is odd"),
    (lambda c: c.update(clamp_len=-1), "clamp_len: an integer of at least 0"),
    (lambda c: c.pop("mem_len"), "mem_len: an integer of at least 0, got None"),
    (lambda c: c.update(tgt_len=4, mem_len=0, clamp_len=0), "tgt_len + mem_len: 4 distances"),
])
def test_a_field_posref_cannot_read_is_one_error_naming_it(edit, message):
    config = _config()
    edit(config)
    assert_config_error(config, message)


def test_the_cases_reach_the_clamp():
    cases = model_cases(_config(), NAME, 3)["sinusoidal.table"]
    assert [c.id for c in cases] == [f"sinusoidal.table/{NAME}/{n}" for n in ("prefill-16", "drawn", "last-1000")]
    assert cases[2].arrays["positions"].tolist() == [997, 998, 999, 1000]
    assert all(16 <= p <= 1000 for p in cases[1].arrays["positions"].tolist())
    assert cases[0].arrays["expected"].shape == (16, 1024)


def _grade(path):
    return run_conformance(f"{path}:table", "sinusoidal.table", model=NAME, seed=5, identities=False)


def test_the_papers_positional_embedding_passes():
    report = _grade(R_TABLE)
    assert report.summary()["overall"] == "pass" and len(report.cases) == 3
    assert not any(c.verdict == "skip" for c in report.cases)


@pytest.mark.parametrize("bug", ["variant_swapped", "frequency_exponent"])
def test_another_tables_rule_fails(bug):
    report = _grade(ROOT / f"examples/sinusoidal/buggy/{bug}.py")
    assert all(c.verdict == "fail" for c in report.cases)
    assert {d.code for c in report.cases for d in c.diagnoses} == {bug.replace("_", "-")}
