"""A model's vision 2-D RoPE from its config: rope2d.apply of the Qwen-VL vision encoders and of
RoPE-ViT (issue 27).

``settings(config)`` returns one :class:`Setting`, or None when the config's model has no 2-D
RoPE posref reads (every model type but those below). What is read, as the models' code reads it:

- Qwen2-VL, Qwen2.5-VL, Qwen3-VL (``model_type`` qwen2_vl, qwen2_5_vl, qwen3_vl): ``vision_config``
  with the encoder's width (``embed_dim`` for qwen2_vl, whose ``hidden_size`` is the language
  model's; ``hidden_size`` for the others) over ``num_heads``, or ``head_dim``; the base
  ``rope_parameters.rope_theta`` (or ``rope_theta``), 10000 when absent (the encoders'
  ``VisionRotaryEmbedding`` default); ``spatial_merge_size`` and ``patch_size`` (or
  ``spatial_patch_size``). transformers' defaults fill what the config leaves out (Qwen2-VL's
  config.json has no vision width or heads: 1280 over 16), and ``notes`` say so. The rotation:
  rotate_half pairs over the whole head, the first head_dim / 4 pairs turned by the patch's row h,
  the last by its column w (``order`` ["y", "x"]), no CLS token; tokens come in the merger's order
  (merge x merge blocks, row-major inside each block), which the cases reproduce.
- RoPE-ViT (``model_type`` rope_vit, the record of its reference code's arguments): head_dim =
  ``embed_dim`` / ``num_heads``, base ``rope_theta``, interleaved pairs (its complex
  multiplication), the first head_dim / 4 pairs turned by the column x, the last by the row y, one
  CLS token not rotated, the training grid ``img_size`` / ``patch_size``. ``rope_mixed`` true is
  RoPE-Mixed: per-head learned frequencies; the cases draw them as the model's
  ``init_random_2d_freqs`` initialises them at ``rope_theta`` (a port must apply whatever
  frequencies it is given: ``spec.freqs``).

A field that is present and wrong (not a positive integer, a width the heads do not divide, a
rope_type other than axial) is a one-line ConfigError naming it.

Params are those of the rope2d catalog: ``{head_dim, base, layout, order, cls_tokens, freqs}``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reference.zoo import fields
from reference.zoo.fields import ConfigError

PROTOCOLS = ("rope2d.apply",)

QWEN_VL = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe")
# transformers' vision config defaults for what a config.json may leave out.
QWEN_DEFAULTS = {
    "qwen2_vl": {"embed_dim": 1280, "num_heads": 16, "patch_size": 14},
    "qwen2_5_vl": {"hidden_size": 1280, "num_heads": 16, "patch_size": 14},
    "qwen3_vl": {"hidden_size": 1152, "num_heads": 16, "patch_size": 16},
    "qwen3_vl_moe": {"hidden_size": 1152, "num_heads": 16, "patch_size": 16},
}
VISION_THETA = 10000.0  # the Qwen-VL vision encoders' rotary base when the config gives none


@dataclass(frozen=True)
class Setting:
    """A vision encoder's 2-D RoPE and the shapes it runs at."""

    kind: str  # "all"
    params: dict
    heads: int
    patch: int  # pixels a side of one patch
    merge: int  # patches a side merged into one language-model token (1: no merger)
    grid: int  # patches a side of the training resolution (RoPE-ViT), or of 448 px (Qwen-VL)
    theta: float  # RoPE-Mixed: the initialisation's theta (params["base"] is unused there)
    mixed: bool = False
    notes: tuple = field(default_factory=tuple)


def settings(config: dict) -> list | None:
    """The model's vision 2-D RoPE setting ([one]); None when it has none posref reads."""
    fields.json_object(config)
    model_type = config.get("model_type")
    if model_type == "rope_vit":
        return [_rope_vit(config)]
    if model_type in QWEN_VL:
        return [_qwen(config, model_type)]
    return None


def _head_dim(source: dict, width_name: str, where: str, heads: int) -> int:
    if source.get("head_dim") is not None:
        head_dim = fields.integer(source, ("head_dim",))
    else:
        width = fields.integer(source, (width_name,))
        if width % heads:
            raise ConfigError(f"{where}{width_name}: {width} is not a multiple of num_heads {heads}")
        head_dim = width // heads
    if head_dim % 4:
        raise ConfigError(f"{where}head_dim: {head_dim}: axial 2-D RoPE needs a multiple of 4")
    return head_dim


def _qwen(config: dict, model_type: str) -> Setting:
    vision = config.get("vision_config")
    if not isinstance(vision, dict):
        raise ConfigError(f"vision_config: model_type {model_type} needs its vision encoder's config (an object), "
                          f"got {vision!r}")
    notes: list = []
    defaults = QWEN_DEFAULTS[model_type]
    width_name = "embed_dim" if model_type == "qwen2_vl" else "hidden_size"
    filled = dict(vision)
    for name in (width_name, "num_heads"):
        if filled.get(name) is None and not (name == width_name and filled.get("head_dim") is not None):
            filled[name] = defaults[name]
            notes.append(f"vision_config.{name} {defaults[name]}: transformers' default (the config has none)")
    heads = fields.integer(filled, ("num_heads",))
    head_dim = _head_dim(filled, width_name, "vision_config.", heads)
    params = vision.get("rope_parameters")
    if params is not None:
        if not isinstance(params, dict):
            raise ConfigError(f"vision_config.rope_parameters: an object, got {params!r}")
        unknown = sorted(set(params) - {"rope_type", "rope_theta"})
        if unknown:
            raise ConfigError(f"vision_config.rope_parameters.{unknown[0]}: not a field of the vision 2-D RoPE")
        if params.get("rope_type", "axial") != "axial":
            raise ConfigError(f"vision_config.rope_parameters.rope_type: {params['rope_type']!r}, not axial")
    params = params or {}
    if params.get("rope_theta") is not None:
        base = fields.positive_number(params["rope_theta"], "vision_config.rope_parameters.rope_theta")
    elif vision.get("rope_theta") is not None:
        base = fields.positive_number(vision["rope_theta"], "vision_config.rope_theta")
    else:
        base = VISION_THETA
        notes.append(f"vision base {VISION_THETA:g}: the vision encoder's rotary default (the config has none)")
    patch = fields.vision_patch(vision, defaults["patch_size"], notes)
    merge = fields.vision_merge(vision, notes)
    rope = {"head_dim": head_dim, "base": base, "layout": "half", "order": ["y", "x"], "cls_tokens": 0, "freqs": None}
    grid = max(merge, 448 // (patch * merge) * merge)
    return Setting("all", rope, heads, patch, merge, grid, base, False, tuple(notes))


def _rope_vit(config: dict) -> Setting:
    heads = fields.integer(config, ("num_heads",))
    head_dim = _head_dim(config, "embed_dim", "", heads)
    if config.get("rope_theta") is None:
        raise ConfigError("needs rope_theta (RoPE-ViT's rotary base)")
    theta = fields.positive_number(config["rope_theta"], "rope_theta")
    mixed = config.get("rope_mixed", False)
    if not isinstance(mixed, bool):
        raise ConfigError(f"rope_mixed: true or false, got {mixed!r}")
    patch = fields.integer(config, ("patch_size",))
    image = fields.integer(config, ("img_size",))
    if image % patch:
        raise ConfigError(f"img_size: {image} is not a multiple of patch_size {patch}")
    rope = {"head_dim": head_dim, "base": theta, "layout": "interleaved", "order": ["x", "y"], "cls_tokens": 1,
            "freqs": None}
    return Setting("all", rope, heads, patch, 1, image // patch, theta, mixed, ())
