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
    (lambda c: c["rope_scaling"].update(llama_4_scaling_beta=0.1), "does not take llama_4_scaling_beta"),
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


def test_the_zoos_rope_records_read_or_name_what_they_lack():
    """Every RoPE record of the zoo is read, except those whose config has a field posref does
    not implement: those fail naming it."""
    unreadable = {"ministral-3-3b": "llama_4_scaling_beta"}
    for name in zoo.names():
        record = zoo.load(name)
        if record["family"][0] != "rope" or record["config"].get("model_type") == "chatglm":
            continue
        if name in unreadable:
            with pytest.raises(ConfigError, match=unreadable[name]):
                plan(record["config"])
            continue
        assert list(plan(record["config"])) == ["rope.apply", "rope.apply_qk"], name


def test_a_model_no_family_reads_is_named():
    with pytest.raises(ConfigError, match="model_type 'chatglm': no posref family reads"):
        plan(zoo.load("glm-4-9b-chat")["config"])
    assert model_config.settings(zoo.load("bloom-176b")["config"]) is None  # ALiBi: another family's
