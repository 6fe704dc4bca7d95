"""transformers' own Qwen-VL rotary code for a zoo model, built from the model's config as the library
builds it (``AutoConfig.for_model`` on the record's config: the text and vision sub-configs,
``rope_scaling`` read into ``rope_parameters`` by the library itself).

- ``adapter_for(name)``: an mrope.apply adapter running the language model's rotary module
  (``Qwen2VLRotaryEmbedding``, ``Qwen2_5_VLRotaryEmbedding``, ``Qwen3VLTextRotaryEmbedding``: cos and
  sin of the three streams recomposed by the model's section layout) and its
  ``apply_rotary_pos_emb``, x held [b, s, h, d] (``unsqueeze_dim`` 2);
- ``vision_adapter_for(name)``: a rope2d.apply adapter running the vision encoder's rotary module
  (``*VisionRotaryEmbedding``, position ids (row h, column w) per patch) and its
  ``apply_rotary_pos_emb_vision`` on the patches flattened to [tokens, heads, d], as the encoder holds
  them.

They ignore ``spec``: each is a port of one model, graded with ``posref conform ... --model NAME``
(tests/mrope/test_model_mrope_grading.py, tests/rope2d/test_model_rope2d_grading.py). Needs
``transformers`` 5 (the ``test`` extra; written against 5.24).
"""

import importlib

from transformers import AutoConfig

from reference import zoo


def _built(name: str):
    """(the model's config as transformers builds it, its modeling module)."""
    config = dict(zoo.load(name)["config"])
    model_type = config.pop("model_type")
    config.pop("architectures", None)
    hf_config = AutoConfig.for_model(model_type, **config)
    return hf_config, importlib.import_module(_modeling(hf_config))


def _rotary_class(module, vision: bool):
    names = [n for n in dir(module) if n.endswith("RotaryEmbedding") and ("Vision" in n) == vision]
    (name,) = names
    return getattr(module, name)


def adapter_for(name: str):
    """An mrope.apply adapter running transformers' M-RoPE of zoo model ``name``."""
    hf_config, module = _built(name)
    rotary = _rotary_class(module, vision=False)(hf_config.text_config)

    def apply(x, positions, spec):
        cos, sin = rotary(x, positions)  # [b, s, d] each, from the [3, b, s] (t, h, w) positions
        out, _ = module.apply_rotary_pos_emb(x, x, cos, sin, unsqueeze_dim=2)
        return out

    return apply


def vision_adapter_for(name: str):
    """A rope2d.apply adapter running transformers' vision 2-D RoPE of zoo model ``name``."""
    hf_config, module = _built(name)
    rotary = _rotary_class(module, vision=True)(hf_config.vision_config)

    def apply(x, coords, spec):
        b, s, h, d = x.shape
        position_ids = coords.flip(-1).reshape(b * s, 2)  # (x, y) -> the encoder's (row h, column w)
        cos, sin = rotary(x, position_ids)  # [tokens, d]
        flat = x.reshape(b * s, h, d)
        out, _ = module.apply_rotary_pos_emb_vision(flat, flat, cos, sin)
        return out.reshape(b, s, h, d)

    return apply


def _modeling(hf_config) -> str:
    """The modeling module beside the config class (gemma3_text's lives in models/gemma3)."""
    package, _, name = type(hf_config).__module__.rpartition(".")
    return f"{package}.{name.replace('configuration_', 'modeling_', 1)}"
