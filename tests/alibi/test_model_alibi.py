"""ALiBi at a model's configuration (issue 27): reference.alibi.model_config and model_cases.

BLOOM (112 heads), Baichuan2-13B (40 heads), MPT-7B and Falcon-RW-1B (32 heads) are read at their
head counts and contexts; Falcon's rotary variant and the other families' models are not this
reader's. The slopes bug of the power-of-two rule fails at BLOOM's and Baichuan's head counts and
passes at the power-of-two models, as the correct fairseq code passes at all four.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from conformance import run_conformance
from conformance.cli import main
from reference import zoo
from reference.alibi import model_config
from reference.zoo.cases import cases as model_cases
from reference.zoo.plan import plan
from support import assert_config_error

ROOT = Path(__file__).resolve().parents[2]
FAIRSEQ = ROOT / "examples/alibi/fairseq_style.py"
POWER_RULE = ROOT / "examples/alibi/buggy/power_of_two_rule.py"
MODELS = {"bloom-176b": (112, None), "mpt-7b": (32, 2048), "baichuan2-13b": (40, 4096), "falcon-rw-1b": (32, 2048)}


def _config(name: str) -> dict:
    return copy.deepcopy(zoo.load(name)["config"])


@pytest.mark.parametrize("name", sorted(MODELS))
def test_each_alibi_record_reads_at_its_heads_and_context(name):
    (setting,) = model_config.settings(_config(name))
    assert (setting.heads, setting.max_positions) == MODELS[name] and setting.causal
    assert list(plan(_config(name))) == ["alibi.slopes", "alibi.bias"]


def test_other_families_records_are_not_alibis():
    readers = {name for name in zoo.names() if model_config.settings(_config(name)) is not None}
    assert readers == set(MODELS)
    assert "rope.apply" in plan(_config("falcon-7b")) and "alibi.bias" not in plan(_config("falcon-7b"))


def test_defaults_the_code_fixes_are_said():
    (falcon,) = model_config.settings(_config("falcon-rw-1b"))
    assert any("transformers' default" in n for n in falcon.notes)  # FalconConfig's 2048
    (bloom,) = model_config.settings(_config("bloom-176b"))
    assert any("no context length" in n for n in bloom.notes)


@pytest.mark.parametrize("name, edit, message", [
    ("bloom-176b", lambda c: c.update(alibi=False), "alibi: False, but BLOOM's attention always adds ALiBi"),
    ("bloom-176b", lambda c: c.update(num_attention_heads=0), "num_attention_heads: a positive integer"),
    ("mpt-7b", lambda c: c["attn_config"].update(alibi_bias_max=16), "attn_config.alibi_bias_max: 16"),
    ("mpt-7b", lambda c: c["attn_config"].update(alibi="yes"), "attn_config.alibi: true or false"),
    ("falcon-rw-1b", lambda c: c.update(alibi=1), "alibi: true or false"),
    ("baichuan2-13b", lambda c: c.update(hidden_size=4096), "hidden_size: 4096: a Baichuan config does not name"),
])
def test_a_field_posref_cannot_read_is_one_error_naming_it(name, edit, message):
    config = _config(name)
    edit(config)
    assert_config_error(config, message)


def test_mpt_without_alibi_is_not_an_alibi_model():
    config = _config("mpt-7b")
    config["attn_config"]["alibi"] = False
    assert model_config.settings(config) is None


def test_the_cases_reach_the_models_context():
    bias = model_cases(_config("baichuan2-13b"), "baichuan2-13b", 3)["alibi.bias"]
    names = [c.id.rsplit("/", 1)[1] for c in bias]
    assert names == ["prefill-8", "drawn", "decode-4095", "decode-8191"]
    assert all(c.params == {"num_heads": 40, "causal": True} for c in bias)
    drawn = [model_cases(_config("baichuan2-13b"), "baichuan2-13b", s)["alibi.bias"][1] for s in (3, 4)]
    assert drawn[0].arrays["q_positions"].tolist() != drawn[1].arrays["q_positions"].tolist()
    assert 8 <= int(drawn[0].arrays["q_positions"][0]) <= 4095
    assert model_cases(_config("bloom-176b"), "bloom-176b", 3)["alibi.bias"][-1].id.endswith("/decode-1048575")
    (slopes,) = model_cases(_config("bloom-176b"), "bloom-176b", 3)["alibi.slopes"]
    assert slopes.id == "alibi.slopes/bloom-176b/heads-112" and slopes.arrays["expected"].shape == (112,)


def _grade(path, fn, protocol, model):
    return run_conformance(f"{path}:{fn}", protocol, model=model, seed=5, dtypes=("float32",), identities=False)


@pytest.mark.parametrize("model", sorted(MODELS))
def test_the_authors_code_passes_at_each_model(model):
    for protocol, fn in (("alibi.slopes", "slopes"), ("alibi.bias", "bias")):
        report = _grade(FAIRSEQ, fn, protocol, model)
        assert report.summary()["overall"] == "pass", [(c.id, c.verdict) for c in report.cases]
        assert report.model["name"] == model and not any(c.verdict == "skip" for c in report.cases)


@pytest.mark.parametrize("model, verdict", [("bloom-176b", "fail"), ("baichuan2-13b", "fail"), ("mpt-7b", "pass"),
                                            ("falcon-rw-1b", "pass")])
def test_the_power_of_two_rule_fails_only_where_the_heads_are_not_one(model, verdict):
    report = _grade(POWER_RULE, "slopes", "alibi.slopes", model)
    assert report.summary()["overall"] == verdict
    codes = {d.code for c in report.cases for d in c.diagnoses}
    assert codes == ({"slopes-power-of-two-rule"} if verdict == "fail" else set())


def test_the_cli_grades_at_bloom_and_a_rope_protocol_is_a_usage_error(capsys):
    assert main(["conform", f"{FAIRSEQ}:slopes", "--protocol", "alibi.slopes", "--model", "bloom-176b", "--seed",
                 "1", "--dtype", "float32"]) == 0
    capsys.readouterr()
    assert main(["conform", f"{FAIRSEQ}:slopes", "--protocol", "rope.apply", "--model", "bloom-176b"]) == 2
    err = capsys.readouterr().err
    assert "implies alibi.slopes, alibi.bias, not rope.apply" in err and err.count("\n") == 1


@pytest.mark.slow
@pytest.mark.parametrize("model", sorted(MODELS))
def test_transformers_bloom_alibi_passes_at_each_model(model):
    pytest.importorskip("transformers")
    lib = ROOT / "examples/alibi/lib_transformers.py"
    for protocol, fn in (("alibi.slopes", "slopes"), ("alibi.bias", "bias")):
        report = run_conformance(f"{lib}:{fn}", protocol, model=model, seed=len(model), dtypes=("float32", "bfloat16"))
        assert report.summary()["overall"] == "pass", [(c.id, c.dtype, c.verdict) for c in report.cases]


# MPT's slopes as transformers builds them (build_mpt_alibi_tensor: 2^(-alibi_bias_max k / n') over
# the next power of two n', the odd-indexed ones first), read back from the bias at key distance 1.
MPT_SLOPES = '''
from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor

def slopes(spec):
    alibi = build_mpt_alibi_tensor(spec.num_heads, 2, alibi_bias_max=BIAS_MAX)  # [heads, 1, 2]: -m, 0
    return -alibi[:, 0, 0]
'''


@pytest.mark.slow
@pytest.mark.parametrize("bias_max, verdict", [(8, "pass"), (16, "fail")])
def test_mpts_own_slopes_are_the_papers_at_alibi_bias_max_8_only(tmp_path, bias_max, verdict):
    """Why the reader takes alibi_bias_max 8 and refuses another: MPT's code at 8 passes at every
    ALiBi model's head count (40 and 112 included); at 16 it is another series."""
    pytest.importorskip("transformers")
    (tmp_path / "mpt.py").write_text(MPT_SLOPES.replace("BIAS_MAX", str(bias_max)))
    for model in ("bloom-176b", "baichuan2-13b", "mpt-7b"):
        report = _grade(tmp_path / "mpt.py", "slopes", "alibi.slopes", model)
        assert report.summary()["overall"] == verdict, (model, [(c.id, c.verdict) for c in report.cases])
