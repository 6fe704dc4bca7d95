"""A model's RoPE read from its config (issue 27): reference.rope.model_config and reference.zoo.plan.

The zoo's records were read from the models' own config files; the catalog's model groups were
written from the model cards. Reading a record must give the catalog's parameters, in both of
transformers' spellings, and a field posref does not implement must be one error naming it.
"""

from __future__ import annotations

import copy

import pytest

from reference import zoo
from reference.rope import model_config
from reference.rope.vectors import MODELS, SCALED_MODELS
from reference.zoo.plan import ConfigError, plan
from support import assert_config_error


def _one(name: str) -> model_config.Setting:
    (setting,) = model_config.settings(zoo.load(name)["config"])
    return setting


# zoo record -> the catalog group written for the same model (layout included)
SAME_AS_CATALOG = {
    "llama-2-7b": MODELS["llama2-d128"]["params"],
    "llama-3-8b": MODELS["llama3-d128"]["params"],
    "qwen2-7b": MODELS["qwen2-d128"]["params"],
    "gpt-neox-20b": MODELS["gpt-neox-20b"]["params"],
    "gpt-j-6b": MODELS["gpt-j-6b"]["params"],
    "llama-3.1-8b": SCALED_MODELS["llama3.1-d128"]["params"],
    "deepseek-v3": SCALED_MODELS["deepseek-v3-yarn40"]["params"],
    "deepseek-v2-lite": SCALED_MODELS["deepseek-v2-yarn40"]["params"],
}


@pytest.mark.parametrize("name", sorted(SAME_AS_CATALOG))
def test_a_record_reads_as_the_catalogs_group_for_that_model(name):
    assert _one(name).params == SAME_AS_CATALOG[name]


def test_code_llama_differs_from_metas_layout_only():
    params = dict(_one("codellama-7b").params)
    assert params.pop("layout") == "half"  # transformers' port; Meta's own code pairs interleaved
    catalog = dict(MODELS["codellama-d128-meta"]["params"])
    assert catalog.pop("layout") == "interleaved" and params == catalog


def test_attention_shape_and_context_come_from_the_config():
    setting = _one("llama-3.1-8b")
    assert (setting.heads, setting.kv_heads, setting.max_positions) == (32, 8, 131072)
    assert _one("falcon-7b").kv_heads == 1  # multi_query
    phi4 = _one("phi-4-mini")
    assert (phi4.params["head_dim"], phi4.params["rotary_dim"]) == (128, 96)  # partial_rotary_factor 0.75
    assert phi4.params["scaling"]["original_max_position_embeddings"] == 4096  # the top-level field
    assert any("original_max_position_embeddings" in note for note in phi4.notes)


def test_defaults_the_architecture_fixes_are_said():
    assert _one("gpt-j-6b").notes == ("base 10000: gptj's code fixes it (the config has no rope_theta)",)
    assert any("transformers' default" in note for note in _one("falcon-7b").notes)
    assert _one("llama-2-7b").notes == ()


def test_gemma3_has_one_rope_per_layer_kind():
    sliding, full = model_config.settings(zoo.load("gemma-3-12b")["config"])
    assert (sliding.kind, sliding.params["base"], sliding.params["scaling"]) == ("sliding_attention", 1e4, None)
    assert (full.kind, full.params["base"], full.params["scaling"]) == (
        "full_attention", 1e6, {"rope_type": "linear", "factor": 8.0})


def _as_rope_parameters(config: dict) -> dict:
    """The same config in transformers 5's spelling: the base inside rope_parameters."""
    config = copy.deepcopy(config)
    scaling = config.pop("rope_scaling", None) or {"rope_type": "default"}
    config["rope_parameters"] = {**scaling, "rope_theta": config.pop("rope_theta")}
    return config


@pytest.mark.parametrize("name", ["llama-3.1-8b", "deepseek-v3", "phi-4-mini", "qwen2-7b", "internlm3-8b"])
def test_both_spellings_of_the_scaling_read_the_same(name):
    config = zoo.load(name)["config"]
    old = model_config.settings(config)
    new = model_config.settings(_as_rope_parameters(config))
    assert [s.params for s in new] == [s.params for s in old]


def test_rope_parameters_per_layer_type():
    config = _as_rope_parameters(zoo.load("llama-3.1-8b")["config"])
    config["rope_parameters"] = {"full_attention": config["rope_parameters"],
                                 "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}
    full, sliding = model_config.settings(config)
    assert (full.kind, full.params["scaling"]["rope_type"]) == ("full_attention", "llama3")
    assert (sliding.kind, sliding.params["base"], sliding.params["scaling"]) == ("sliding_attention", 1e4, None)


@pytest.mark.parametrize("edit, message", [
    (lambda c: c["rope_scaling"].update(beta_fast=32.0), "does not take beta_fast"),
    (lambda c: c["rope_scaling"].update(type="yarn"), "type 'yarn' and rope_type 'llama3' disagree"),
    (lambda c: c["rope_scaling"].update(rope_type="su"), "rope_scaling: "),
    (lambda c: c.pop("rope_theta"), "needs rope_theta"),
    (lambda c: c.update(partial_rotary_factor=0.2), "partial_rotary_factor: 0.2 of head_dim 128 gives rotary_dim 25"),
    (lambda c: c.update(num_key_value_heads=5), "num_key_value_heads: 5 does not divide"),
    (lambda c: c.update(rope_theta="big"), "rope_theta: a positive number"),
])
def test_a_field_posref_cannot_read_is_one_error_naming_it(edit, message):
    config = copy.deepcopy(zoo.load("llama-3.1-8b")["config"])
    edit(config)
    assert_config_error(config, message)


def test_the_zoos_rope_records_all_read():
    for name in zoo.names():
        record = zoo.load(name)
        if record["family"][0] == "rope":
            assert list(plan(record["config"])) == ["rope.apply", "rope.apply_qk"], name


def test_chatglm_format_reads_as_its_modeling_code():
    """THUDM's GLM-4 config: base 10000 x rope_ratio, RoPE on half of kv_channels, interleaved pairs,
    multi_query_group_num kv heads, the context seq_length."""
    (setting,) = model_config.settings(zoo.load("glm-4-9b-chat")["config"])
    assert setting.params == {"head_dim": 128, "rotary_dim": 64, "base": 5e6, "layout": "interleaved", "scaling": None}
    assert (setting.heads, setting.kv_heads, setting.max_positions) == (32, 2, 131072)
    assert any("rope_ratio 500" in note for note in setting.notes)
    # The transformers-native record of the same model, read as written (its rope_theta is 10000).
    (hf,) = model_config.settings(zoo.load("glm-4-9b-chat-hf")["config"])
    assert {**hf.params, "base": 5e6} == setting.params and hf.params["base"] == 1e4


@pytest.mark.parametrize("edit, message", [
    (lambda c: c.update(original_rope=False), "original_rope: False"),
    (lambda c: c.update(rope_theta=1e4), "rope_theta: not a field of the ChatGLM format"),
    (lambda c: c.update(multi_query_group_num=3), "multi_query_group_num: 3 does not divide"),
    (lambda c: c.pop("seq_length"), "needs seq_length"),
    (lambda c: c.update(rope_ratio=-1), "rope_ratio: a positive number"),
])
def test_chatglm_fields_posref_cannot_read_are_named(edit, message):
    config = copy.deepcopy(zoo.load("glm-4-9b-chat")["config"])
    edit(config)
    assert_config_error(config, message)


def test_ministral_query_scale_is_named_not_graded():
    (setting,) = model_config.settings(zoo.load("ministral-3-3b")["config"])
    assert setting.params["scaling"]["rope_type"] == "yarn" and "llama_4_scaling_beta" not in setting.params["scaling"]
    assert any("llama_4_scaling_beta 0.1 scales the queries after RoPE" in note for note in setting.notes)


def test_a_model_no_family_reads_is_named():
    with pytest.raises(ConfigError, match="model_type 'rwkv': no posref family reads"):
        plan({"model_type": "rwkv", "hidden_size": 2048, "num_hidden_layers": 24})
    assert model_config.settings(zoo.load("bloom-176b")["config"]) is None  # ALiBi: another family's
