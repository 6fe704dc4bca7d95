"""Reading a model config's fields: the rules two or more families' readers share (issue 26, 27).

Each family's ``reference/<family>/model_config.py`` reads a Hugging Face ``config.json`` (or a zoo
record's ``config``) as the model's own code reads it; the rules here are the ones several of them
apply to the same fields, written once so that a field is refused with the same one-line message
whichever family reads it. Every refusal is a :class:`ConfigError` naming the field; a value taken
from a default is the caller's to say in its setting's notes (``notes``, where a reader takes one).

The readers, and the families that use them:

- :func:`json_object`: the config itself (every family);
- :func:`check_integer`, :func:`integer`: a count or size (alibi, learned, rope, mrope, rope2d,
  sinusoidal's Transformer-XL table);
- :func:`positive_number`: a base or timescale (rope, mrope, rope2d, sinusoidal);
- :func:`kv_heads`, :func:`head_dim`: a language model's attention shape (rope, mrope);
- :func:`vision_patch`, :func:`vision_merge`: a Qwen-VL vision encoder's patching (mrope, rope2d).
"""

from __future__ import annotations


class ConfigError(ValueError):
    """A config posref cannot read as the model's code would: one line naming the field (or the
    model type nobody reads). The one error class of every family's reader and of
    reference.zoo.plan."""


def json_object(config) -> dict:
    """``config`` when it is a dict (a JSON object); ConfigError naming its type otherwise."""
    if not isinstance(config, dict):
        raise ConfigError(f"a config is a JSON object, got {type(config).__name__}")
    return config


def check_integer(value, name: str, low: int | None = None, why: str = "") -> int:
    """``value`` when it is an int (not a bool) of at least ``low``; ConfigError naming ``name``.

    ``low`` None is "a positive integer" (at least 1: a count of heads, a width, a length); a
    number is "an integer of at least <low>" (Transformer-XL's clamp_len and mem_len, which may be
    0), ``why`` (when given) the reason for the bound, in parentheses after it. A missing field
    checked here (``value`` None) is refused as a value: "<name>: ..., got None".
    """
    bound = 1 if low is None else low
    if isinstance(value, bool) or not isinstance(value, int) or value < bound:
        rule = "a positive integer" if low is None else f"an integer of at least {low}"
        raise ConfigError(f"{name}: {rule}{f' ({why})' if why else ''}, got {value!r}")
    return value


def integer(config: dict, names, low: int | None = None, default: int | None = None) -> int:
    """The first of ``names`` (one name, or several spellings tried in order) that ``config`` holds
    and is not null, checked by :func:`check_integer` at ``low``; else ``default``; else
    ConfigError "needs <a> or <b>".

    The spellings are the ones transformers' config classes accept for one quantity (head counts
    ``num_attention_heads`` / ``n_head`` / ``num_heads``; widths ``hidden_size`` / ``n_embd``;
    contexts ``max_position_embeddings`` / ``n_positions`` / ``max_seq_len`` / ``seq_length``):
    each family passes the ones its architectures use. A field present with null counts as absent
    (HF serialises an unset optional field as null).
    """
    names = (names,) if isinstance(names, str) else tuple(names)
    for name in names:
        if config.get(name) is not None:
            return check_integer(config[name], name, low)
    if default is not None:
        return default
    raise ConfigError(f"needs {' or '.join(names)}")


def positive_number(value, name: str) -> float:
    """``value`` as a float when it is a positive int or float (not a bool); ConfigError naming
    ``name`` otherwise. The rule of a rotary base (``rope_theta``, ``rotary_emb_base``,
    ``rope_local_base_freq``, ``rope_parameters.rope_theta``, a vision encoder's ``rope_theta``)
    and of tensor2tensor's ``min_timescale`` / ``max_timescale``: the frequencies are powers of
    it, so zero, a negative or a string has no reading."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ConfigError(f"{name}: a positive number, got {value!r}")
    return float(value)


def kv_heads(config: dict, heads: int) -> int:
    """The key/value head count of a language model with ``heads`` query heads, as transformers'
    attention modules read it: ChatGLM's ``multi_query_group_num`` when its
    ``multi_query_attention`` is true (THUDM's modeling_chatglm.py: grouped-query attention with
    that many groups), 1 for Falcon's ``multi_query`` true, else ``num_key_value_heads`` (or Falcon's
    ``num_kv_heads``), ``heads`` when absent (multi-head attention: LlamaConfig's default). It
    must divide ``heads`` (grouped-query attention repeats each kv head heads / kv times)."""
    if config.get("multi_query") is True:
        return 1
    names = ("multi_query_group_num",) if config.get("multi_query_attention") is True \
        else ("num_key_value_heads", "num_kv_heads")
    kv = integer(config, names, default=None if names[0] == "multi_query_group_num" else heads)
    if heads % kv:
        raise ConfigError(f"{names[0]}: {kv} does not divide num_attention_heads {heads}")
    return kv


def head_dim(config: dict, heads: int) -> int:
    """The dimension RoPE acts on per head of a language model with ``heads`` query heads:
    DeepSeek's ``qk_rope_head_dim`` (MLA rotates only the decoupled rope part of each head), else
    ``head_dim`` when the config gives it (Gemma, Qwen3: it need not be hidden_size / heads), else
    the width (``hidden_size``, GPT-2's ``n_embd``, ``d_model``, ``n_embed``) over ``heads``, as
    transformers' attention modules compute it; a width ``heads`` does not divide is refused."""
    if "qk_rope_head_dim" in config:
        return integer(config, ("qk_rope_head_dim",))
    if config.get("head_dim") is not None:
        return integer(config, ("head_dim",))
    hidden = integer(config, ("hidden_size", "n_embd", "d_model", "n_embed"))
    if hidden % heads:
        raise ConfigError(f"hidden_size: {hidden} is not a multiple of num_attention_heads {heads} (give head_dim)")
    return hidden // heads


def vision_patch(vision: dict, default: int, notes: list) -> int:
    """A Qwen-VL vision encoder's patch size (pixels a side) from its ``vision_config``:
    ``patch_size``, or the older ``spatial_patch_size`` (Qwen2-VL's first configs; the two must
    agree when both are there), or ``default`` (the model type's vision config class default),
    said in ``notes``."""
    given = {name: vision[name] for name in ("patch_size", "spatial_patch_size") if vision.get(name) is not None}
    if len(set(map(repr, given.values()))) > 1:
        raise ConfigError(f"vision_config: patch_size and spatial_patch_size disagree ({given})")
    if not given:
        notes.append(f"vision_config.patch_size {default}: transformers' default (the config has none)")
        return default
    return integer(vision, tuple(given))


VISION_MERGE = 2  # transformers' Qwen2VLVisionConfig / Qwen2_5_VLVisionConfig / Qwen3VLVisionConfig default


def vision_merge(vision: dict, notes: list) -> int:
    """A Qwen-VL vision encoder's ``spatial_merge_size`` (patches a side merged into one
    language-model token by its PatchMerger), or transformers' default :data:`VISION_MERGE` when
    the ``vision_config`` has none, said in ``notes``."""
    if vision.get("spatial_merge_size") is not None:
        return integer(vision, ("spatial_merge_size",))
    notes.append(f"vision_config.spatial_merge_size {VISION_MERGE}: transformers' default (the config has none)")
    return VISION_MERGE
