"""T5 buckets at a model's configuration (issue 27): reference.t5.model_config and model_cases.

t5-v1.1-base, t5-efficient-tiny (no max distance in its config: T5Config's 128), mT5-base and
Flan-T5-large are read as two stacks, the encoder's bidirectional buckets and the decoder's
unidirectional ones; transformers' own bucket function passes at each, and the documented bucket
bugs fail on the stack they break (not halving the buckets: the encoder only).
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from conformance import run_conformance
from reference import zoo
from reference.t5 import model_config
from reference.zoo.cases import cases as model_cases
from reference.zoo.plan import plan
from support import assert_config_error

ROOT = Path(__file__).resolve().parents[2]
HF_T5 = ROOT / "examples/t5/hf_t5.py"
MODELS = ("flan-t5-large", "mt5-base", "t5-efficient-tiny", "t5-v1.1-base")


def _config(name: str) -> dict:
    return copy.deepcopy(zoo.load(name)["config"])


@pytest.mark.parametrize("name", MODELS)
def test_each_t5_record_reads_as_two_stacks(name):
    encoder, decoder = model_config.settings(_config(name))
    buckets = {"num_buckets": 32, "max_distance": 128}
    assert (encoder.kind, encoder.params) == ("encoder", {**buckets, "bidirectional": True})
    assert (decoder.kind, decoder.params) == ("decoder", {**buckets, "bidirectional": False})
    assert set(plan(_config(name))) == {"t5.bucket", "attention.forward"}  # and its layer, unscaled


def test_a_missing_max_distance_takes_t5configs_default_and_says_so():
    encoder, _ = model_config.settings(_config("t5-efficient-tiny"))
    (note,) = encoder.notes
    assert note == "relative_attention_max_distance 128: transformers' T5Config default (the config has none)"
    assert model_config.settings(_config("t5-v1.1-base"))[0].notes == ()


def test_the_models_own_buckets_are_read():
    config = _config("t5-v1.1-base")
    config.update(relative_attention_num_buckets=64, relative_attention_max_distance=256)
    assert {s.params["num_buckets"] for s in model_config.settings(config)} == {64}
    assert {s.params["max_distance"] for s in model_config.settings(config)} == {256}
    config["architectures"] = ["T5EncoderModel"]
    assert [s.kind for s in model_config.settings(config)] == ["encoder"]


def test_other_families_records_are_not_t5s():
    assert {name for name in zoo.names() if model_config.settings(_config(name)) is not None} == set(MODELS)


@pytest.mark.parametrize("edit, message", [
    (lambda c: c.update(relative_attention_num_buckets=1), "relative_attention_num_buckets: must be an integer in [2"),
    (lambda c: c.update(relative_attention_num_buckets=2),
     "relative_attention_num_buckets: must be >= 4 when bidirectional"),
    (lambda c: c.update(relative_attention_max_distance=8),
     "relative_attention_max_distance: must exceed max_exact = 8"),
    (lambda c: c.update(relative_attention_max_distance="128"), "relative_attention_max_distance: must be an integer"),
])
def test_a_field_posref_cannot_read_is_one_error_naming_it(edit, message):
    config = _config("t5-v1.1-base")
    edit(config)
    assert_config_error(config, message)


def test_the_cases_follow_the_models_buckets():
    config = _config("t5-v1.1-base")
    config.update(relative_attention_num_buckets=64, relative_attention_max_distance=256)
    cases = model_cases(config, "wide", 2)["t5.bucket"]
    ids = [c.id for c in cases]
    assert ids[:4] == [f"t5.bucket/wide-encoder/{n}" for n in ("span", "edges", "saturation", "drawn")]
    assert ids[4:] == [f"t5.bucket/wide-decoder/{n}" for n in ("span", "edges", "saturation", "drawn")]
    edges = set(cases[1].arrays["relative_positions"].tolist())
    assert {15, 16, 17, 31, 32, 33, 255, 256, 257, -16} <= edges  # max_exact 16 (64 buckets / 2 / 2) and doublings
    decoder_edges = set(cases[5].arrays["relative_positions"].tolist())
    assert {31, 32, 33, 63, 64, 65} <= decoder_edges  # max_exact 32 in the decoder
    assert {255, 256, 257} <= set(cases[2].arrays["relative_positions"].tolist())


def _grade(path, model):
    return run_conformance(f"{path}:bucket", "t5.bucket", model=model, seed=5, dtypes=("float32",), identities=False)


@pytest.mark.parametrize("model", MODELS)
def test_transformers_bucket_passes_at_each_model(model):
    report = _grade(HF_T5, model)
    assert report.summary()["overall"] == "pass", [(c.id, c.verdict) for c in report.cases]
    assert len(report.cases) == 8 and not any(c.verdict == "skip" for c in report.cases)


@pytest.mark.parametrize("bug, stacks", [
    ("not_halved", {"encoder"}), ("causal_flag_swapped", {"encoder", "decoder"}),
    ("direction_swapped", {"encoder", "decoder"}), ("clamp_missing", {"encoder", "decoder"}),
])
def test_a_bucket_bug_fails_on_the_stack_it_breaks(bug, stacks):
    path = ROOT / f"examples/t5/buggy/{bug}.py"
    report = _grade(path, "t5-efficient-tiny")
    failed = {c.id.split("/")[1].rsplit("-", 1)[1] for c in report.cases if c.verdict == "fail"}
    assert failed == stacks
    code = __import__("runpy").run_path(str(path))["CODE"]
    assert {d.code for c in report.cases for d in c.diagnoses} == {code}



def test_a_config_file_is_read_at_its_own_buckets(tmp_path):
    """--model-config: a Flan-T5 config.json with max distance 64 is graded at 64 (the edges and the
    saturation move), and the report names the file."""
    import json

    config = _config("flan-t5-large")
    config["relative_attention_max_distance"] = 64
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    report = run_conformance(f"{HF_T5}:bucket", "t5.bucket", model_config=path, seed=5, identities=False)
    assert report.summary()["overall"] == "pass" and report.model["config"] == str(path)
    cases = model_cases(config, "config", 5)["t5.bucket"]
    assert {c.params["max_distance"] for c in cases} == {64} and len(report.cases) == len(cases) == 8
    assert {63, 64, 65} <= set(cases[2].arrays["relative_positions"].tolist())  # the encoder's saturation
