"""A model's RoPE from its Hugging Face ``config.json``: the rope.apply parameters of each layer kind.

``settings(config)`` reads the fields as transformers' modeling code does for the architectures
below (``model_type``) and returns one :class:`Setting` per distinct RoPE of the model (Gemma 3:
its sliding layers at ``rope_local_base_freq`` with no scaling, its global layers at
``rope_theta`` with ``rope_scaling``), or None when the config's model does not use RoPE on its
attention (BLOOM, T5, BERT, an M-RoPE model: other families). Both spellings of the scaling are
read: ``rope_scaling`` beside ``rope_theta`` (transformers 4.x) and ``rope_parameters`` holding
``rope_theta`` (transformers 5), flat or keyed by layer type.

Every value comes from a field, or from a default the architecture's code hard-codes, and then
the Setting's ``notes`` say so (GPT-J's base 10000, the ``original_max_position_embeddings`` that
transformers takes from ``max_position_embeddings``). A field that would change the RoPE and that
posref does not implement (an unknown scaling key such as gpt-oss's ``truncate``, a model type
whose pairing posref does not know) raises ConfigError naming the field: never a silent default.

``PROTOCOLS`` are the protocols these settings are graded with (reference.zoo.plan).

Params are those of the catalog's RoPE groups: ``{head_dim, rotary_dim, base, layout, scaling}``
(``scaling`` a dict with ``rope_type``, checked by reference.numerics.scaling, or None).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reference.numerics import scaling as scalings
from reference.zoo import fields
from reference.zoo.fields import ConfigError

# The pair layout of each architecture's RoPE in transformers' modeling code: "half" pairs (i,
# i + r/2) (rotate_half), "interleaved" pairs (2i, 2i + 1) (GPT-J's rotate_every_two, GLM's
# interleaved rotate_half, DeepSeek's complex multiplication in its own inference code).
LAYOUTS = {
    "llama": "half", "mistral": "half", "mixtral": "half", "qwen2": "half", "qwen3": "half",
    "qwen3_moe": "half", "gemma": "half", "gemma2": "half", "gemma3_text": "half", "phi3": "half",
    "gpt_neox": "half", "internlm3": "half", "gpt_oss": "half", "falcon": "half",
    "RefinedWebModel": "half", "ministral": "half", "ministral3": "half",
    "gptj": "interleaved", "glm": "interleaved", "deepseek_v2": "interleaved", "deepseek_v3": "interleaved",
}
# Architectures whose code hard-codes the base (their configs have no field for it).
FIXED_BASE = {"gptj": 10000.0, "RefinedWebModel": 10000.0, "falcon": 10000.0}
# Architectures whose config may leave the context out: transformers' config class default.
DEFAULT_CONTEXT = {"RefinedWebModel": 2048, "falcon": 2048}
# Scaling types whose original context transformers takes from max_position_embeddings when the
# scaling dict does not give it.
ORIGINAL_FROM_CONTEXT = ("dynamic", "yarn", "longrope")


PROTOCOLS = ("rope.apply", "rope.apply_qk")  # one tensor; q and k with the model's kv heads


@dataclass(frozen=True)
class Setting:
    """One RoPE of a model: the rope.apply parameters and the attention shape it runs at."""

    kind: str  # "all" layers, or the layer type ("full_attention", "sliding_attention")
    params: dict
    heads: int
    kv_heads: int
    max_positions: int
    notes: tuple = field(default_factory=tuple)


def settings(config: dict) -> list | None:
    """The model's RoPE settings, one per distinct layer kind; None when it uses no RoPE."""
    fields.json_object(config)
    if isinstance(config.get("text_config"), dict):  # a multimodal config: its language model
        config = {"model_type": config.get("model_type"), **config["text_config"]}
    model_type = config.get("model_type")
    if model_type == "chatglm":
        return [_chatglm(config)]
    if model_type == "nomic_bert":
        layout = _nomic_layout(config)
    elif model_type in LAYOUTS:
        layout = LAYOUTS[model_type]
    else:
        return None
    if config.get("alibi") is True:  # Falcon's ALiBi variant
        return None
    notes: list = []
    heads = fields.integer(config, ("num_attention_heads", "n_head", "num_heads"))
    kv_heads = fields.kv_heads(config, heads)
    head_dim = fields.head_dim(config, heads)
    rotary_dim = _rotary_dim(config, head_dim)
    context = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length")
    if model_type in DEFAULT_CONTEXT and not any(config.get(name) is not None for name in context):
        notes.append(f"max_position_embeddings {DEFAULT_CONTEXT[model_type]}: transformers' default for "
                     f"{model_type} (the config has none)")
    max_positions = fields.integer(config, context, default=DEFAULT_CONTEXT.get(model_type))
    kinds = _kinds(config, model_type, notes)
    out = []
    for kind, (base, scaling) in kinds.items():
        scaling = _scaling(scaling, config, max_positions, kind, notes)
        params = {"head_dim": head_dim, "rotary_dim": rotary_dim, "base": base, "layout": layout,
                  "scaling": scaling}
        out.append(Setting(kind, params, heads, kv_heads, max_positions, tuple(notes)))
    return out


def _chatglm(config: dict) -> Setting:
    """THUDM's ChatGLM format (GLM-4's original release, ``trust_remote_code``), read as its
    modeling_chatglm.py reads it: head_dim ``kv_channels`` (else hidden_size / heads); RoPE on the
    first half of each head (``RotaryEmbedding(kv_channels // 2)``), pairs interleaved (its
    ``apply_rotary_pos_emb`` views the rotary part as [..., rotary_dim / 2, 2]); base 10000 times
    ``rope_ratio`` (1 when absent: ChatGLM2's code default); the context ``seq_length``.
    transformers' convert_glm_weights_to_hf.py writes the same product as ``rope_theta``."""
    if config.get("original_rope", True) is not True:
        raise ConfigError(f"original_rope: {config['original_rope']!r}: posref reads ChatGLM's original_rope true only")
    for name in ("rope_scaling", "rope_theta", "partial_rotary_factor"):
        if config.get(name) is not None:  # not fields of this format: a config mixing the two is ambiguous
            raise ConfigError(f"{name}: not a field of the ChatGLM format (model_type chatglm); "
                              "use model_type glm for transformers' form")
    notes = []
    heads = fields.integer(config, ("num_attention_heads",))
    if config.get("kv_channels") is not None:
        head_dim = fields.integer(config, ("kv_channels",))
    else:
        head_dim = fields.head_dim(config, heads)
    if head_dim % 4:
        raise ConfigError(f"kv_channels: {head_dim}: ChatGLM rotates half of each head in pairs (a multiple of 4)")
    ratio = 1.0
    if config.get("rope_ratio") is None:
        notes.append("rope_ratio 1: modeling_chatglm.py's default (the config has none)")
    else:
        ratio = fields.positive_number(config["rope_ratio"], "rope_ratio")
    params = {"head_dim": head_dim, "rotary_dim": head_dim // 2, "base": 10000.0 * ratio, "layout": "interleaved",
              "scaling": None}
    notes.append(f"base {10000.0 * ratio:g}: 10000 x rope_ratio {ratio:g} (ChatGLM's RotaryEmbedding)")
    return Setting("all", params, heads, fields.kv_heads(config, heads), fields.integer(config, ("seq_length",)),
                   tuple(notes))


def _rotary_dim(config: dict, head_dim: int) -> int:
    given = {name: config[name] for name in ("partial_rotary_factor", "rotary_pct", "rotary_emb_fraction")
             if config.get(name) is not None}
    if config.get("rotary_dim") is not None:
        given["rotary_dim"] = config["rotary_dim"] / head_dim if isinstance(config["rotary_dim"], int) else None
    if len(set(given.values())) > 1:
        raise ConfigError(f"{' and '.join(given)} disagree ({given})")
    if not given:
        return head_dim
    name, fraction = next(iter(given.items()))
    if not isinstance(fraction, (int, float)) or isinstance(fraction, bool) or not 0 < fraction <= 1:
        raise ConfigError(f"{name}: a fraction of head_dim in (0, 1], got {config[name]!r}")
    rotary = int(head_dim * fraction)
    if rotary % 2 or rotary < 2:
        raise ConfigError(f"{name}: {fraction} of head_dim {head_dim} gives rotary_dim {rotary} (int of "
                          f"{head_dim * fraction:g}, as transformers rounds it), not an even size")
    return rotary


def _nomic_layout(config: dict) -> str:
    for name in ("rotary_emb_scale_base", "rotary_scaling_factor"):
        if config.get(name) is not None:
            raise ConfigError(f"{name}: {config[name]!r}: nomic_bert's scaled rotary is not implemented by posref")
    interleaved = config.get("rotary_emb_interleaved", False)
    if not isinstance(interleaved, bool):
        raise ConfigError(f"rotary_emb_interleaved: true or false, got {interleaved!r}")
    return "interleaved" if interleaved else "half"


def _kinds(config: dict, model_type: str, notes: list) -> dict:
    """{layer kind: (base, scaling dict or None)}."""
    params = config.get("rope_parameters")
    if params is not None:  # transformers 5: the base inside, flat or per layer type
        if not isinstance(params, dict):
            raise ConfigError(f"rope_parameters: an object, got {params!r}")
        if "rope_type" in params or "rope_theta" in params or "type" in params:
            params = {"all": params}
        kinds = {}
        for kind, p in params.items():
            if not isinstance(p, dict) or "rope_theta" not in p:
                raise ConfigError(f"rope_parameters.{kind}: needs rope_theta")
            rest = {k: v for k, v in p.items() if k != "rope_theta"}
            kinds[kind] = (fields.positive_number(p["rope_theta"], f"rope_parameters.{kind}.rope_theta"), rest or None)
        return _merge_equal(kinds)
    for name in ("rope_theta", "rotary_emb_base"):
        if config.get(name) is not None:
            base = fields.positive_number(config[name], name)
            break
    else:
        if model_type not in FIXED_BASE:
            raise ConfigError("needs rope_theta (the RoPE base)")
        base = FIXED_BASE[model_type]
        notes.append(f"base {base:g}: {model_type}'s code fixes it (the config has no rope_theta)")
    scaling = config.get("rope_scaling")
    if model_type == "gemma3_text":  # sliding layers: their own base, no scaling
        local = fields.positive_number(config.get("rope_local_base_freq", 10000.0), "rope_local_base_freq")
        return {"sliding_attention": (local, None), "full_attention": (base, scaling)}
    return {"all": (base, scaling)}


def _merge_equal(kinds: dict) -> dict:
    """One kind when every layer type has the same RoPE."""
    values = list(kinds.values())
    return {"all": values[0]} if all(v == values[0] for v in values) else kinds


def _scaling(scaling, config: dict, max_positions: int, kind: str, notes: list):
    """The scaling dict as reference.numerics.scaling takes it; ConfigError naming a bad field."""
    if scaling is None:
        return None
    if not isinstance(scaling, dict):
        raise ConfigError(f"rope_scaling: an object, got {scaling!r}")
    scaling = dict(scaling)
    if "type" in scaling:  # transformers 4's spelling, kept beside rope_type by some configs
        spelled = scaling.pop("type")
        if scaling.setdefault("rope_type", spelled) != spelled:
            raise ConfigError(f"rope_scaling: type {spelled!r} and rope_type {scaling['rope_type']!r} disagree")
    rope_type = scaling.get("rope_type", "default")
    if rope_type == "default":
        return None
    if rope_type == "mrope" or "mrope_section" in scaling:
        raise ConfigError("rope_scaling.mrope_section: an M-RoPE model (family mrope, not rope.apply)")
    if rope_type in ORIGINAL_FROM_CONTEXT and "original_max_position_embeddings" not in scaling:
        original = config.get("original_max_position_embeddings", max_positions)
        scaling["original_max_position_embeddings"] = original
        source = "original_max_position_embeddings" if "original_max_position_embeddings" in config \
            else "max_position_embeddings"
        notes.append(f"{kind}: rope_scaling.original_max_position_embeddings {original} from the config's {source}, "
                     "as transformers reads it")
    if "llama_4_scaling_beta" in scaling:
        # Ministral 3 (transformers' modeling_ministral3.py) multiplies the queries by
        # 1 + beta ln(1 + floor(p / original)) after apply_rotary_pos_emb: an attention-side scale,
        # not part of the rotation rope.apply and rope.apply_qk grade.
        beta = scaling.pop("llama_4_scaling_beta")
        notes.append(f"{kind}: rope_parameters.llama_4_scaling_beta {beta!r} scales the queries after RoPE "
                     "(1 + beta ln(1 + floor(p / original_max_position_embeddings))): not graded here")
    if rope_type == "longrope" and "max_position_embeddings" not in scaling:
        scaling["max_position_embeddings"] = max_positions
    try:
        scalings.resolve(scaling)
    except ValueError as exc:
        raise ConfigError(f"rope_scaling: {str(exc).removeprefix('scaling: ')}") from None
    return scaling
