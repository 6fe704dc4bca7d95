"""The field readers the model-config readers share (reference.zoo.fields; issues 26, 27).

Each family's reader refuses a field with the shared rule's one-line message and raises the one
ConfigError that reference.zoo.plan catches; no reader imports another family's.
"""

from __future__ import annotations

import ast
import inspect

import pytest

from reference import families
from reference.zoo import fields, plan


def _readers():
    return {f: m for f in families.names() if (m := families.part(f, "model_config")) is not None}


def test_every_reader_raises_the_one_config_error():
    readers = _readers()
    # transformer_xl reads the scores' shape; the table R is sinusoidal.table's (the sinusoidal reader)
    assert {"rope", "mrope", "rope2d", "alibi", "t5", "learned", "sinusoidal", "transformer_xl"} <= set(readers)
    for family, reader in readers.items():
        assert reader.ConfigError is fields.ConfigError is plan.ConfigError, family
        assert issubclass(reader.ConfigError, ValueError)


def test_no_reader_imports_another_family():
    for family, reader in _readers().items():
        tree = ast.parse(inspect.getsource(reader))
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        others = {m.split(".")[1] for m in imported if m.startswith("reference.")} - {family, *families.SHARED}
        assert not others, (family, others)


@pytest.mark.parametrize("config, message", [
    ([1, 2], "a config is a JSON object, got list"),
    ({"model_type": "llama", "num_attention_heads": True}, "num_attention_heads: a positive integer, got True"),
    ({"model_type": "llama", "n_head": 0}, "n_head: a positive integer, got 0"),
    ({"model_type": "bloom"}, "needs n_head or num_attention_heads"),
    ({"model_type": "llama", "num_attention_heads": 8, "num_key_value_heads": 3},
     "num_key_value_heads: 3 does not divide num_attention_heads 8"),
    ({"model_type": "llama", "num_attention_heads": 8, "hidden_size": 100},
     "hidden_size: 100 is not a multiple of num_attention_heads 8 (give head_dim)"),
    ({"model_type": "transfo-xl", "d_model": 1.5}, "d_model: an integer of at least 2, got 1.5"),
    ({"model_type": "tensor2tensor-transformer", "hidden_size": 3},
     "hidden_size: an integer of at least 4 (two timescales), got 3"),
    ({"model_type": "tensor2tensor-transformer", "hidden_size": 8, "max_timescale": "1e4"},
     "max_timescale: a positive number, got '1e4'"),
])
def test_the_shared_rules_messages_name_the_field(config, message):
    with pytest.raises(fields.ConfigError) as info:
        plan.plan(config)
    assert str(info.value) == message


def test_integer_takes_the_first_spelling_given_and_a_default_only_when_none_is():
    config = {"num_attention_heads": None, "n_head": 12, "num_heads": 16}
    assert fields.integer(config, ("num_attention_heads", "n_head", "num_heads")) == 12
    assert fields.integer(config, ("max_position_embeddings",), default=2048) == 2048
    assert fields.integer({"mem_len": 0}, "mem_len", low=0) == 0
    with pytest.raises(fields.ConfigError, match=r"^mem_len: an integer of at least 1, got 0$"):
        fields.integer({"mem_len": 0}, "mem_len", low=1)


def test_language_model_shape():
    assert fields.kv_heads({"multi_query": True, "num_key_value_heads": 8}, 8) == 1
    assert fields.kv_heads({}, 32) == 32 and fields.kv_heads({"num_kv_heads": 8}, 32) == 8
    assert fields.head_dim({"qk_rope_head_dim": 64, "head_dim": 192, "hidden_size": 7168}, 128) == 64
    assert fields.head_dim({"head_dim": 256, "hidden_size": 3072}, 16) == 256
    assert fields.head_dim({"n_embd": 4096}, 16) == 256


def test_vision_patch_and_merge_say_their_defaults():
    notes: list = []
    assert fields.vision_patch({}, 14, notes) == 14 and fields.vision_merge({}, notes) == fields.VISION_MERGE
    assert notes == ["vision_config.patch_size 14: transformers' default (the config has none)",
                     "vision_config.spatial_merge_size 2: transformers' default (the config has none)"]
    notes = []
    assert fields.vision_patch({"spatial_patch_size": 16}, 14, notes) == 16 and not notes
    with pytest.raises(fields.ConfigError, match="patch_size and spatial_patch_size disagree"):
        fields.vision_patch({"patch_size": 14, "spatial_patch_size": 16}, 14, [])
