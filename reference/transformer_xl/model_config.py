"""Transformer-XL's relative attention scores from its Hugging Face ``config.json``: transformer_xl.score.

``settings(config)`` returns one :class:`Setting` for ``model_type`` "transfo-xl" (transformers'
TransfoXLConfig, the port of kimiyoung/transformer-xl mem_transformer.py), or None for any other
model, read as ``RelPartialLearnableMultiHeadAttn`` uses it: ``n_head`` heads of ``d_head``,
``d_model`` (r_net is [n_head d_head, d_model], R is [sin | cos] of d_model / 2 frequencies),
``clamp_len`` (distances above it read R at clamp_len; 0 clamps nothing), ``mem_len`` memory slots
before each ``tgt_len`` segment. Every one of them is required (absent: "<name>: ..., got None").
``attn_type`` other than 0 (the paper's relative attention; 1-3 are other encodings of the same code)
and an odd d_model are ConfigErrors naming the field.

Read but not graded, said in the notes: ``same_length`` (the attention mask then also hides the keys
j <= i - mask_shift_len, so every query sees mem_len keys; a mask, not a score) and ``untie_r`` (u and
v per layer rather than shared: the score of one layer reads one u and one v either way). The table R
itself is graded by the sinusoidal family (reference.sinusoidal.model_config).

``PROTOCOLS``: transformer_xl.score at the model's full shape (the cases: model_cases.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reference.zoo import fields
from reference.zoo.fields import ConfigError

PROTOCOLS = ("transformer_xl.score",)


@dataclass(frozen=True)
class Setting:
    """transformer_xl.score's parameters (n_head, d_head, d_model, clamp_len) and the model's
    segment (tgt_len) and memory (mem_len)."""

    kind: str
    params: dict
    tgt_len: int
    mem_len: int
    notes: tuple = field(default_factory=tuple)


def settings(config: dict) -> list | None:
    """[Setting] of a transfo-xl config; None for any other model."""
    if fields.json_object(config).get("model_type") != "transfo-xl":
        return None
    attn_type = config.get("attn_type", 0)
    if attn_type != 0:
        raise ConfigError(f"attn_type: {attn_type!r}: only 0, the paper's relative attention, is transformer_xl.score")
    d_model = fields.check_integer(config.get("d_model"), "d_model", 2)
    if d_model % 2:
        raise ConfigError(f"d_model: {d_model} is odd (R is [sin | cos] halves of d_model / 2 frequencies)")
    n_head = fields.check_integer(config.get("n_head"), "n_head", 1)
    d_head = fields.check_integer(config.get("d_head"), "d_head", 1)
    clamp = fields.check_integer(config.get("clamp_len"), "clamp_len", 0)
    tgt_len = fields.check_integer(config.get("tgt_len"), "tgt_len", 1)
    mem_len = fields.check_integer(config.get("mem_len"), "mem_len", 0)
    notes = []
    if config.get("same_length"):
        notes.append("same_length: a mask over the scores (every query sees mem_len keys), not graded by "
                     "transformer_xl.score")
    if config.get("untie_r") is False:
        notes.append("untie_r false: u and v shared by the layers; one layer's score reads one u and one v either way")
    params = {"n_head": n_head, "d_head": d_head, "d_model": d_model, "clamp_len": clamp}
    return [Setting("all", params, tgt_len, mem_len, tuple(notes))]
