"""A model's M-RoPE from its Hugging Face ``config.json``: mrope.positions and mrope.apply of the
language model of Qwen2-VL, Qwen2.5-VL and Qwen3-VL (issue 27).

``settings(config)`` reads the fields as transformers' modeling code does for the model types of
VARIANTS and returns one :class:`Setting`, or None when the config's model has no M-RoPE (every
other model type, unless it carries an ``mrope_section``: then ConfigError, posref does not know
how that model lays its sections out). The fields, in either spelling (``rope_scaling`` beside
``rope_theta`` in transformers 4.x, ``rope_parameters`` holding ``rope_theta`` in transformers 5;
flat, or under ``text_config`` in the newer nested configs):

- ``mrope_section`` [t, h, w] (pairs per stream, adding up to head_dim / 2), laid out as the
  model type's code fixes it: consecutive slices for qwen2_vl and qwen2_5_vl (Qwen2-VL's
  ``apply_multimodal_rotary_pos_emb``), interleaved for qwen3_vl (``apply_interleaved_mrope``);
  ``mrope_interleaved``, when present, must agree with that;
- ``rope_theta``, ``head_dim`` (or hidden_size / num_attention_heads), ``num_attention_heads``,
  ``num_key_value_heads``, ``max_position_embeddings``;
- from ``vision_config``: ``spatial_merge_size`` (patches merged per side into one language-model
  token; transformers' default 2 when absent, said in the notes) and, for qwen2_5_vl,
  ``tokens_per_second`` (the temporal index step per second of video).

The rotation is rotate_half over the whole head (``layout`` half, ``rotary_dim`` = head_dim): the
Qwen-VL models have no partial rotary, so a ``partial_rotary_factor`` other than 1 is an error, as
is a ``rope_type`` other than default / mrope (no scaling type is implemented for M-RoPE) and any
key of the scaling dict posref does not know.

Params are those of the mrope catalog: ``{head_dim, rotary_dim, base, layout, mrope_section,
variant}``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reference.mrope.core import streams
from reference.zoo import fields
from reference.zoo.fields import ConfigError

PROTOCOLS = ("mrope.positions", "mrope.apply")

# The section layout each model type's code fixes.
VARIANTS = {"qwen2_vl": "qwen2", "qwen2_5_vl": "qwen2", "qwen3_vl": "qwen3", "qwen3_vl_moe": "qwen3"}
# Keys of rope_scaling / rope_parameters that an M-RoPE config may carry.
KNOWN_KEYS = {"mrope_section", "rope_type", "type", "rope_theta", "mrope_interleaved"}
# transformers' Qwen2VLVisionConfig / Qwen2_5_VLVisionConfig / Qwen3VLVisionConfig patch_size defaults
DEFAULT_PATCH = {"qwen2_vl": 14, "qwen2_5_vl": 14, "qwen3_vl": 16, "qwen3_vl_moe": 16}
# Qwen2.5-VL's processor: 2 frames per temporal patch at its default 2 fps, one second per grid step.
SECONDS_PER_GRID = 1.0


@dataclass(frozen=True)
class Setting:
    """The M-RoPE of a model's language model and the shapes it runs at."""

    kind: str  # "all": one M-RoPE for every layer
    params: dict
    heads: int
    kv_heads: int
    max_positions: int
    merge: int  # vision_config.spatial_merge_size: patches per side of one image token
    patch: int  # vision_config.patch_size: pixels per side of one patch
    frame_step: int | None  # temporal index step between video grid frames (None: videos are frames)
    notes: tuple = field(default_factory=tuple)


def _scaling_dict(config: dict) -> tuple[str | None, dict | None]:
    """(the field's name, the dict) holding mrope_section, or (None, None)."""
    for name in ("rope_parameters", "rope_scaling"):
        value = config.get(name)
        if isinstance(value, dict) and "mrope_section" in value:
            return name, value
    return None, None


def settings(config: dict) -> list | None:
    """The model's M-RoPE setting ([one]); None when its model has no M-RoPE."""
    fields.json_object(config)
    model_type = config.get("model_type")
    vision = config.get("vision_config")
    text = config
    if isinstance(config.get("text_config"), dict):  # transformers 5's nesting: the language model's fields
        text = {**{k: v for k, v in config.items() if k != "text_config"}, **config["text_config"]}
    name, scaling = _scaling_dict(text)
    if model_type not in VARIANTS:
        if scaling is not None:
            raise ConfigError(f"{name}.mrope_section: model_type {model_type!r} is not one whose M-RoPE posref "
                              f"knows ({', '.join(VARIANTS)})")
        return None
    if scaling is None:
        raise ConfigError("needs rope_scaling.mrope_section (or rope_parameters.mrope_section): "
                          f"model_type {model_type} uses M-RoPE")
    variant = VARIANTS[model_type]
    notes: list = []
    unknown = sorted(set(scaling) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(f"{name}.{unknown[0]}: not a field of {model_type}'s M-RoPE posref implements")
    rope_type = scaling.get("rope_type", scaling.get("type", "default"))
    if rope_type not in ("default", "mrope"):
        raise ConfigError(f"{name}.rope_type: {rope_type!r}: posref implements M-RoPE without scaling only")
    interleaved = scaling.get("mrope_interleaved")
    if interleaved is not None and (not isinstance(interleaved, bool) or interleaved != (variant == "qwen3")):
        raise ConfigError(f"{name}.mrope_interleaved: {interleaved!r} disagrees with model_type {model_type}, whose "
                          f"code lays the sections {'interleaved' if variant == 'qwen3' else 'consecutively'}")
    if name == "rope_parameters":
        if "rope_theta" not in scaling:
            raise ConfigError("rope_parameters: needs rope_theta")
        base = fields.positive_number(scaling["rope_theta"], "rope_parameters.rope_theta")
    elif text.get("rope_theta") is not None:
        base = fields.positive_number(text["rope_theta"], "rope_theta")
    else:
        raise ConfigError("needs rope_theta (the RoPE base)")
    factor = text.get("partial_rotary_factor")
    if factor is not None and factor != 1:
        raise ConfigError(f"partial_rotary_factor: {factor!r}: {model_type} rotates the whole head")
    heads = fields.integer(text, ("num_attention_heads",))
    kv_heads = fields.kv_heads(text, heads)
    head_dim = fields.head_dim(text, heads)
    section = scaling["mrope_section"]
    if not isinstance(section, list) or any(isinstance(v, bool) or not isinstance(v, int) for v in section):
        raise ConfigError(f"{name}.mrope_section: three integers, got {section!r}")
    try:
        streams(head_dim, section, variant)
    except ValueError as exc:
        raise ConfigError(f"{name}.{exc} (head_dim {head_dim})") from None
    max_positions = fields.integer(text, ("max_position_embeddings",))
    frame_step = 1 if variant == "qwen2" else None
    if vision is not None and not isinstance(vision, dict):
        raise ConfigError(f"vision_config: an object, got {vision!r}")
    vision = vision or {}
    merge = fields.vision_merge(vision, notes)
    patch = fields.vision_patch(vision, DEFAULT_PATCH[model_type], notes)
    if model_type == "qwen2_5_vl":
        if vision.get("tokens_per_second") is None:
            raise ConfigError("vision_config.tokens_per_second: needed for qwen2_5_vl's temporal positions")
        tps = fields.integer(vision, ("tokens_per_second",))
        frame_step = int(tps * SECONDS_PER_GRID)
        notes.append(f"video: the temporal index steps by tokens_per_second {tps} x {SECONDS_PER_GRID:g} s per grid "
                     "(the processor's default 2 fps over temporal patches of 2 frames)")
    params = {"head_dim": head_dim, "rotary_dim": head_dim, "base": base, "layout": "half",
              "mrope_section": [int(v) for v in section], "variant": variant}
    return [Setting("all", params, heads, kv_heads, max_positions, merge, patch, frame_step, tuple(notes))]

