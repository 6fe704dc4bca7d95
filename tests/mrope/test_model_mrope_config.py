"""A Qwen-VL model's M-RoPE read from its config (issue 27): reference.mrope.model_config.

The zoo's Qwen2-VL, Qwen2.5-VL and Qwen3-VL records must read as the models' own configurations
(the catalog's groups for the same models, and transformers' reading of the same config), in
every spelling (rope_scaling or rope_parameters, flat or under text_config), and a field posref
cannot read must be one error naming it. The RoPE reader leaves these models to this family.
"""

from __future__ import annotations

import copy

import pytest

from reference import zoo
from reference.golden.fresh import Draw
from reference.mrope import model_config
from reference.mrope.model_cases import groups
from reference.mrope.positions import rope_index
from reference.mrope.vectors import MODELS
from reference.rope import model_config as rope_config
from reference.zoo.plan import ConfigError, plan
from support import assert_config_error

VL = ("qwen2-vl-7b", "qwen2.5-vl-72b", "qwen3-vl-f1")


def _one(config) -> model_config.Setting:
    (setting,) = model_config.settings(config)
    return setting


def _config(name):
    return copy.deepcopy(zoo.load(name)["config"])


@pytest.mark.parametrize("name, catalog", [("qwen2-vl-7b", "qwen2-vl"), ("qwen2.5-vl-72b", "qwen2-vl"),
                                           ("qwen3-vl-f1", "qwen3-vl")])
def test_a_record_reads_as_the_catalogs_group_for_that_model(name, catalog):
    assert _one(_config(name)).params == MODELS[catalog][0]


def test_attention_shape_context_and_vision_fields():
    qwen2 = _one(_config("qwen2-vl-7b"))
    assert (qwen2.heads, qwen2.kv_heads, qwen2.max_positions, qwen2.merge, qwen2.patch) == (28, 4, 32768, 2, 14)
    assert qwen2.frame_step == 1 and any("spatial_merge_size 2: transformers' default" in n for n in qwen2.notes)
    qwen25 = _one(_config("qwen2.5-vl-72b"))
    assert (qwen25.heads, qwen25.kv_heads, qwen25.max_positions, qwen25.frame_step) == (64, 8, 128000, 2)
    qwen3 = _one(_config("qwen3-vl-f1"))  # text_config nesting, rope_parameters
    assert (qwen3.heads, qwen3.kv_heads, qwen3.max_positions, qwen3.merge, qwen3.patch) == (64, 8, 262144, 2, 16)
    assert qwen3.frame_step is None and qwen3.notes == ()


@pytest.mark.parametrize("name", VL)
def test_the_reading_is_transformers_reading(name):
    """transformers builds the same config (AutoConfig.for_model): the same sections, base, head
    size, heads, context and merge size."""
    pytest.importorskip("transformers")
    from transformers import AutoConfig

    config = _config(name)
    hf = AutoConfig.for_model(config.pop("model_type"), **{k: v for k, v in config.items() if k != "architectures"})
    text, setting = hf.text_config, _one(_config(name))
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    assert setting.params["mrope_section"] == list(text.rope_parameters["mrope_section"])
    assert setting.params["base"] == text.rope_parameters["rope_theta"] and setting.params["head_dim"] == head_dim
    assert (setting.heads, setting.kv_heads, setting.max_positions) == (
        text.num_attention_heads, text.num_key_value_heads, text.max_position_embeddings)
    assert (setting.merge, setting.patch) == (hf.vision_config.spatial_merge_size, hf.vision_config.patch_size)


def _as_rope_parameters(config):
    config = copy.deepcopy(config)
    config["rope_parameters"] = {**config.pop("rope_scaling"), "rope_theta": config.pop("rope_theta")}
    return config


def _nested(config):
    """transformers 5's layout: the language model's fields under text_config."""
    outer = {k: config[k] for k in ("architectures", "model_type", "vision_config")}
    return {**outer, "text_config": {k: v for k, v in config.items() if k not in outer}}


@pytest.mark.parametrize("spell", [_as_rope_parameters, _nested, lambda c: _nested(_as_rope_parameters(c))])
def test_every_spelling_reads_the_same(spell):
    config = _config("qwen2-vl-7b")
    assert _one(spell(config)) == _one(config)


def test_a_vl_config_implies_mrope_and_its_vision_rope_and_not_rope_apply():
    for name in VL:
        config = _config(name)
        assert rope_config.settings(config) is None
        assert set(plan(config)) == {"mrope.positions", "mrope.apply", "rope2d.apply"}, name


def _edit(path, value):
    def edit(config):
        *parents, key = path
        node = config
        for p in parents:
            node = node[p]
        if value is KeyError:
            node.pop(key)
        else:
            node[key] = value
    return edit


@pytest.mark.parametrize("edit, message", [
    (_edit(("rope_scaling", "mrope_section"), [16, 24, 16]), "rope_scaling.mrope_section: qwen2 sections must add up to"),
    (_edit(("rope_scaling", "mrope_section"), [16, 24, "24"]), "rope_scaling.mrope_section: three integers"),
    (_edit(("rope_scaling", "mrope_interleaved"), True), "rope_scaling.mrope_interleaved: True disagrees"),
    (_edit(("rope_scaling", "rope_type"), "yarn"), "rope_scaling.rope_type: 'yarn'"),
    (_edit(("rope_scaling", "factor"), 4.0), "rope_scaling.factor: not a field"),
    (_edit(("rope_scaling",), KeyError), "needs rope_scaling.mrope_section"),
    (_edit(("rope_theta",), KeyError), "needs rope_theta"),
    (_edit(("partial_rotary_factor",), 0.5), "partial_rotary_factor: 0.5"),
    (_edit(("num_key_value_heads",), 5), "num_key_value_heads: 5 does not divide"),
    (_edit(("model_type",), "glm4v"), "rope_scaling.mrope_section: model_type 'glm4v' is not one"),
    (_edit(("vision_config", "patch_size"), 16), "patch_size and spatial_patch_size disagree"),
    (_edit(("vision_config", "spatial_merge_size"), 0), "spatial_merge_size: a positive integer"),
])
def test_a_field_posref_cannot_read_is_one_error_naming_it(edit, message):
    config = _config("qwen2-vl-7b")
    edit(config)
    assert_config_error(config, message)


def test_qwen2_5_needs_its_temporal_step_and_qwen3_its_interleaving():
    config = _config("qwen2.5-vl-72b")
    del config["vision_config"]["tokens_per_second"]
    with pytest.raises(ConfigError, match="vision_config.tokens_per_second"):
        plan(config)
    config = _config("qwen3-vl-f1")
    config["text_config"]["rope_parameters"]["mrope_interleaved"] = False
    with pytest.raises(ConfigError, match="rope_parameters.mrope_interleaved: False disagrees"):
        plan(config)


@pytest.mark.parametrize("name", VL)
def test_the_positions_cases_are_real_sequences(name):
    """Every mrope.positions case is a sequence the rule accepts, of the model's merged image sizes,
    and each image sits between two text tokens (the vision start and end markers)."""
    setting = _one(_config(name))
    tests = groups(setting, Draw(4, name), "mrope.positions")[0].tests
    assert [t.name for t in tests] == ["image-448x448", "images-drawn", "image-wide", "batch-2"]
    side = 448 // (setting.patch * setting.merge)
    assert tests[0].grids == ((1, side, side),)
    for test in tests:
        pos = rope_index([list(r) for r in test.token_types], test.grids)
        assert pos.shape[1:] == (len(test.token_types), len(test.token_types[0]))
        runs = [len(run) for row in test.token_types for run in "".join(map(str, row)).split("0") if run]
        assert runs == [t * h * w for t, h, w in test.grids]  # one run of image tokens per image
        assert all(row[0] == 0 and row[-1] == 0 for row in test.token_types)


@pytest.mark.parametrize("name", VL)
def test_the_apply_cases_cover_the_context(name):
    setting = _one(_config(name))
    tests = {t.name: t for t in groups(setting, Draw(4, name), "mrope.apply")[0].tests}
    L = setting.max_positions
    assert tests[f"decode-{L - 1}"].positions == (((L - 1,),),) * 3
    assert max(max(row) for s in tests["image-at-end"].positions for row in s) == L - 1
    assert all(max(row) < L for t in tests.values() for s in t.positions for row in s)
    t, h, w = (s[0] for s in tests["image-corner"].positions)
    assert h[0] - t[0] == 127 and w[1] - t[1] == 127 and w[0] != w[1]
    assert tests["prefill-8"].heads == setting.heads and tests["text-drawn"].heads == setting.kv_heads
    assert ("video" in tests) == (setting.frame_step is not None)
    if "video" in tests:
        t = tests["video"].positions[0][0]
        assert t[2] - t[0] == setting.frame_step
