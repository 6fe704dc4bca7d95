"""A model's T5 relative-position buckets from its Hugging Face ``config.json``: t5.bucket.

``settings(config)`` returns the bucket settings of a T5-family model (``model_type`` t5, mt5,
umt5, longt5: the same _relative_position_bucket), read as transformers' T5Attention reads them,
or None for any other model:

- ``relative_attention_num_buckets`` and ``relative_attention_max_distance`` (T5Config's
  defaults 32 and 128 when the config has none, as t5-efficient-tiny's has no max distance: the
  notes say so, and a port must apply the same default);
- one Setting per stack: the encoder's buckets are bidirectional (kind "encoder"), the
  decoder's unidirectional (kind "decoder", the self-attention; T5's cross-attention has no
  position bias). An encoder-only architecture (T5EncoderModel) has the encoder's only.

A value reference.numerics.bias.t5.check_config refuses (num_buckets below 2, or 4 bidirectional; a
max_distance not above the exact range) is a ConfigError naming the config's field.

``PROTOCOLS``: t5.bucket. (attention.forward with the T5 bias is not graded at a model's
configuration: T5 does not scale its scores by 1/sqrt(d_kv), and attention.forward's spec always
does.)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reference.numerics.bias.t5 import check_config
from reference.zoo import fields
from reference.zoo.fields import ConfigError

PROTOCOLS = ("t5.bucket",)
T5_TYPES = ("t5", "mt5", "umt5", "longt5")
DEFAULTS = {"relative_attention_num_buckets": 32, "relative_attention_max_distance": 128}  # T5Config's
FIELD = {"num_buckets": "relative_attention_num_buckets", "max_distance": "relative_attention_max_distance"}


@dataclass(frozen=True)
class Setting:
    """One stack's buckets: t5.bucket's parameters (num_buckets, max_distance, bidirectional)."""

    kind: str  # "encoder" or "decoder"
    params: dict
    notes: tuple = field(default_factory=tuple)


def settings(config: dict) -> list | None:
    """[Setting] per stack of a T5-family model; None for another model."""
    fields.json_object(config)
    if config.get("model_type") not in T5_TYPES:
        return None
    notes, values = [], {}
    for name, default in DEFAULTS.items():
        if config.get(name) is None:
            notes.append(f"{name} {default}: transformers' T5Config default (the config has none)")
        values[name] = config.get(name, default) if config.get(name) is not None else default
    stacks = [("encoder", True), ("decoder", False)]
    architectures = config.get("architectures") or []
    if architectures and all(str(a).endswith("EncoderModel") for a in architectures):
        stacks = stacks[:1]
    out = []
    for kind, bidirectional in stacks:
        try:
            check_config(values[FIELD["num_buckets"]], values[FIELD["max_distance"]], bidirectional)
        except ValueError as exc:
            name, _, why = str(exc).partition(": ")
            raise ConfigError(f"{FIELD.get(name, name)}: {why} ({kind})") from None
        params = {"num_buckets": values[FIELD["num_buckets"]], "max_distance": values[FIELD["max_distance"]],
                  "bidirectional": bidirectional}
        out.append(Setting(kind, params, tuple(notes)))
    return out
