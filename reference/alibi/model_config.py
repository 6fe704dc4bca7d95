"""A model's ALiBi from its Hugging Face ``config.json``: the alibi.slopes and alibi.bias settings.

``settings(config)`` returns one :class:`Setting` (the model's head count, causal attention, its
context when the config states one) for the architectures whose attention adds ALiBi, read as
their modeling code reads them, or None when the config's model does not use ALiBi:

- ``bloom`` (transformers' BloomModel): ALiBi always, nothing in the config selects it; a config
  that says ``alibi: false`` contradicts the architecture (ConfigError);
- ``mpt`` (MptModel): ``attn_config.alibi`` (transformers' MptAttentionConfig defaults it to
  true) with ``attn_config.alibi_bias_max``: build_mpt_alibi_tensor's slopes are
  2^(-alibi_bias_max k / n') over the next power of two n', then the odd-indexed ones first;
  at alibi_bias_max 8 that is exactly the paper's slopes for every head count (the even
  exponents of the 2n'-series are the n'-series), at any other value a series alibi.slopes does
  not take (ConfigError naming the field);
- ``falcon`` / ``RefinedWeb`` / ``RefinedWebModel`` with ``alibi: true`` (falcon-rw-1b); ``alibi``
  false or absent: RoPE (reference.rope.model_config reads it);
- ``baichuan``: the config does not say; the checkpoint's own modeling code does. Baichuan(2)-13B
  (hidden_size 5120, 40 heads) adds ALiBi, the 7B models rotate (RoPE). Only the 13B shape is
  read; another is a ConfigError naming hidden_size, never a guess.

All four are causal decoders: the bias is graded causal (-m (i - j) for keys j <= i; BLOOM's and
Falcon's m j differs by a per-row constant softmax ignores, and grades equal).

``PROTOCOLS``: alibi.slopes (at the model's head count) and alibi.bias (over its context).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reference.zoo import fields
from reference.zoo.fields import ConfigError

PROTOCOLS = ("alibi.slopes", "alibi.bias")
FALCON_TYPES = ("falcon", "RefinedWeb", "RefinedWebModel")
# Baichuan's 13B shape (its modeling_baichuan.py builds ALiBi; the 7B's builds RoPE).
BAICHUAN_ALIBI = {"hidden_size": 5120, "num_attention_heads": 40}
FALCON_CONTEXT = 2048  # transformers' FalconConfig.max_position_embeddings default
MPT_BIAS_MAX = 8  # the paper's 2^(-8k/n): the only alibi_bias_max whose slopes alibi.slopes takes


@dataclass(frozen=True)
class Setting:
    """The model's ALiBi: its head count, causal attention, and its context (None: the config
    states none, ALiBi needs none)."""

    kind: str
    heads: int
    causal: bool
    max_positions: int | None
    notes: tuple = field(default_factory=tuple)


def settings(config: dict) -> list | None:
    """[Setting] of the model's ALiBi; None when the model does not use ALiBi."""
    fields.json_object(config)
    model_type = config.get("model_type")
    notes: list = []
    if model_type == "bloom":
        if "alibi" in config and config["alibi"] is not True:
            raise ConfigError(f"alibi: {config['alibi']!r}, but BLOOM's attention always adds ALiBi (bloom has no "
                              "other positional encoding)")
        heads = fields.integer(config, ("n_head", "num_attention_heads"))
        context = _context(config, ("seq_length", "max_position_embeddings"))
    elif model_type == "mpt":
        attn = config.get("attn_config", {})
        if not isinstance(attn, dict):
            raise ConfigError(f"attn_config: an object, got {attn!r}")
        alibi = attn.get("alibi", True)
        if not isinstance(alibi, bool):
            raise ConfigError(f"attn_config.alibi: true or false, got {alibi!r}")
        if not alibi:
            return None
        if "alibi" not in attn:
            notes.append("attn_config.alibi true: transformers' MptAttentionConfig default (the config has none)")
        bias_max = attn.get("alibi_bias_max", MPT_BIAS_MAX)
        if isinstance(bias_max, bool) or not isinstance(bias_max, (int, float)) or bias_max != MPT_BIAS_MAX:
            raise ConfigError(f"attn_config.alibi_bias_max: {bias_max!r}: MPT's slopes 2^(-{bias_max} k/n) are not "
                              f"the paper's (alibi_bias_max {MPT_BIAS_MAX}); posref's alibi.slopes takes only those")
        heads = fields.integer(config, ("n_heads", "num_attention_heads"))
        context = _context(config, ("max_seq_len",))
        if attn.get("alibi") and config.get("learned_pos_emb"):
            notes.append("learned_pos_emb true as well: transformers' MptModel builds no position table (ALiBi only)")
    elif model_type in FALCON_TYPES:
        alibi = config.get("alibi", False)
        if not isinstance(alibi, bool):
            raise ConfigError(f"alibi: true or false, got {alibi!r}")
        if not alibi:
            return None  # Falcon's rotary variant: reference.rope.model_config
        heads = fields.integer(config, ("num_attention_heads", "n_head"))
        context = _context(config, ("max_position_embeddings",))
        if context is None:  # FalconConfig's default, as reference.rope.model_config reads it
            context = FALCON_CONTEXT
            notes.append(f"max_position_embeddings {FALCON_CONTEXT}: transformers' default for {model_type} (the "
                         "config has none)")
        notes.append("Falcon adds the bias before the 1/sqrt(head_dim) scale and builds it from bfloat16 slopes "
                     "(transformers' build_alibi_tensor): the graded tensor is the bias itself, in float64")
    elif model_type == "baichuan":
        for name, want in BAICHUAN_ALIBI.items():
            if config.get(name) != want:
                raise ConfigError(f"{name}: {config.get(name)!r}: a Baichuan config does not name its positional "
                                  "encoding; posref reads the 13B's (hidden_size 5120, 40 heads: ALiBi), not the 7B's "
                                  "(RoPE)")
        heads = BAICHUAN_ALIBI["num_attention_heads"]
        context = _context(config, ("model_max_length", "max_position_embeddings"))
        notes.append("ALiBi: Baichuan-13B's modeling code (the config has no positional field)")
    else:
        return None
    if context is None:
        notes.append("no context length in the config (ALiBi needs none): positions reach 2^20 - 1")
    return [Setting("all", heads, True, context, tuple(notes))]


def _context(config: dict, names: tuple) -> int | None:
    """The context length under the first of ``names`` the config holds; None when it holds none
    (ALiBi needs no context: the cases then reach 2^20 - 1)."""
    if not any(config.get(name) is not None for name in names):
        return None
    return fields.integer(config, names)
