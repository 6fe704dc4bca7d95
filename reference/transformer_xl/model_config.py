"""A Transformer-XL's relative position table from its config: sinusoidal.table at its width.

``settings(config)`` reads a ``transfo-xl`` config as the paper's code (kimiyoung/transformer-xl
mem_transformer.py, and transformers' TransfoXL port) builds the table R its scores read:
``PositionalEmbedding(d_model)``, inverse frequencies 1 / 10000^(2c / d_model), [sin | cos]
halves, at the distances ``pos_seq = arange(klen - 1, -1, -1)`` clamped to ``clamp_len`` when it
is positive, klen = ``tgt_len`` + ``mem_len``. That is sinusoidal.table (concatenated, exponent
"2i/d", base 10000) at d_model, graded up to the largest distance the model feeds:
clamp_len, or klen - 1 when it clamps nothing. None for any other model.

``attn_type`` other than 0 (the paper's relative attention; 1-3 are other encodings in the same
code) is a ConfigError naming it, as is an odd ``d_model`` or a negative clamp_len.

Not graded here: transformer_xl.score at the model's shape. Its golden value of one case of 4
queries and 4 keys at n_head 16, d_head 64, d_model 1024 took 15 s (docs/models.md), and the clamp
shows only past clamp_len keys.

``PROTOCOLS``: sinusoidal.table (the cases: reference.sinusoidal.model_cases).
"""

from __future__ import annotations

from reference.sinusoidal.model_config import Setting

PROTOCOLS = ("sinusoidal.table",)
BASE = 10000.0  # PositionalEmbedding's inv_freq: 1 / 10000^(arange(0, d, 2) / d)


class ConfigError(ValueError):
    """A field posref cannot read as the model's code would: one line naming the field."""


def settings(config: dict) -> list | None:
    """[Setting] of the model's R table; None when the model is not a Transformer-XL."""
    if not isinstance(config, dict):
        raise ConfigError(f"a config is a JSON object, got {type(config).__name__}")
    if config.get("model_type") != "transfo-xl":
        return None
    attn_type = config.get("attn_type", 0)
    if attn_type != 0:
        raise ConfigError(f"attn_type: {attn_type!r}: only 0, the paper's relative attention, reads a sinusoidal "
                          "table of distances")
    d_model = _int(config, "d_model", 2)
    if d_model % 2:
        raise ConfigError(f"d_model: {d_model} is odd (the table is [sin | cos] halves of d_model / 2 frequencies)")
    clamp = _int(config, "clamp_len", 0)
    klen = _int(config, "tgt_len", 1) + _int(config, "mem_len", 0)
    top = clamp if 0 < clamp < klen else klen - 1
    if top < 19:
        raise ConfigError(f"tgt_len + mem_len: {klen} distances, fewer than the 20 posref's cases read")
    params = {"d_model": d_model, "layout": "concatenated", "exponent": "2i/d", "base": BASE, "dims": 1}
    why = f"clamp_len {clamp}" if top == clamp else f"tgt_len + mem_len {klen} (clamp_len {clamp} clamps nothing)"
    return [Setting("all", params, (f"largest distance {top}: {why}",), max_position=top)]


def _int(config: dict, name: str, low: int) -> int:
    value = config.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{name}: an integer of at least {low}, got {value!r}")
    return value
