"""A model's attention layer from its Hugging Face ``config.json``, where the position encoding lives
inside attention: attention.forward at T5's configuration.

``settings(config)`` returns one Setting per stack of a T5-family model (the buckets as the t5
family reads them: reference/t5/model_config.py, found through the family registry), or None for
any other model. Each is attention.forward's parameters:

- ``num_heads`` (kv heads the same: T5 has no grouped-query attention) and ``d_kv``, the head
  size (T5Config's default 64 when absent: the notes say so);
- encoding ``t5``: ``relative_attention_num_buckets``, ``relative_attention_max_distance``;
  the encoder bidirectional (not causal), the decoder's self-attention causal;
- ``logit_scale`` 1: T5's scores are q . k + bias, unscaled (Raffel et al. 2020, sec. 2.1 and
  Mesh TensorFlow's initialisation; transformers' T5Attention): a port that keeps SDPA's default
  1/sqrt(d_kv) fails ``attention-scale-wrong``;
- ``d_model`` 8, not the model's: the projections are drawn weights and their width carries no
  position; the golden reference's cost grows with it (the notes say so).

``PROTOCOLS``: attention.forward. RoPE and ALiBi models are graded by their own families'
protocols (rope.apply, alibi.bias); their attention is not read here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reference import families
from reference.zoo import fields
from reference.zoo.fields import ConfigError

PROTOCOLS = ("attention.forward",)
D_MODEL = 8  # the drawn hidden width of a model case (not the model's d_model)
T5_HEAD = 64  # T5Config's d_kv default


@dataclass(frozen=True)
class Setting:
    """One attention stack: attention.forward's parameters."""

    kind: str  # "encoder" or "decoder"
    params: dict
    notes: tuple = field(default_factory=tuple)


def settings(config: dict) -> list | None:
    """[Setting] per stack of a T5-family model; None for another model."""
    stacks = families.part("t5", "model_config").settings(config)
    if not stacks:
        return None
    notes = []
    heads = fields.integer(config, ("num_heads",), default=8)
    if config.get("num_heads") is None:
        notes.append("num_heads 8: transformers' T5Config default (the config has none)")
    head_dim = fields.integer(config, ("d_kv",), default=T5_HEAD)
    if config.get("d_kv") is None:
        notes.append(f"d_kv {T5_HEAD}: transformers' T5Config default (the config has none)")
    width = fields.integer(config, ("d_model",), default=512)
    notes.append(f"d_model {D_MODEL} in the cases, not the model's {width}: the projections are drawn weights")
    out = []
    for stack in stacks:
        params = {"num_heads": heads, "num_kv_heads": heads, "head_dim": head_dim, "d_model": D_MODEL,
                  "causal": not stack.params["bidirectional"], "encoding": "t5",
                  "num_buckets": stack.params["num_buckets"], "max_distance": stack.params["max_distance"],
                  "logit_scale": 1.0}
        out.append(Setting(stack.kind, params, tuple(notes) + tuple(stack.notes)))
    return out


__all__ = ["ConfigError", "PROTOCOLS", "Setting", "settings"]
