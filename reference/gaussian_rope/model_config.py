"""A Gaussian-kernel RoPE configuration: gaussian_rope.apply and gaussian_rope.score at its kernel.

``settings(config)`` reads ``model_type`` "gaussian_rope" (the zoo's ``gaussian-rope-seed-002``:
no released model exists, the record keeps the seed document's example under reference.gaussian_rope's
names): ``head_dim``, ``kernel`` {a1, a2, s1, s2} for K(m) = a1 exp(-m^2 / 2 s1^2) + a2 exp(-m^2 /
2 s2^2), ``rope_theta`` (the base) and ``seq_len`` (the sequence length the example runs at). The
pairs are (x_2i, x_2i+1), as the document's formula and code write them: the record has no field
for the layout, and the Setting's notes say so. None for any other model; a field posref cannot
read is a ConfigError naming it.

``PROTOCOLS``: gaussian_rope.apply and gaussian_rope.score (the cases: model_cases.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reference.gaussian_rope.core import check_kernel
from reference.zoo.fields import ConfigError, check_integer, json_object, positive_number

PROTOCOLS = ("gaussian_rope.apply", "gaussian_rope.score")
LAYOUT = "interleaved"  # the document's pairs (x_2i, x_2i+1)

__all__ = ["ConfigError", "PROTOCOLS", "Setting", "settings"]


@dataclass(frozen=True)
class Setting:
    """The configuration's parameters (gaussian_rope's: head_dim, rotary_dim, base, layout, kernel)
    and the sequence length it runs at."""

    kind: str
    params: dict
    seq_len: int
    notes: tuple = field(default_factory=tuple)


def settings(config: dict) -> list | None:
    """[Setting] of a Gaussian-kernel RoPE configuration; None for any other model."""
    json_object(config)
    if config.get("model_type") != "gaussian_rope":
        return None
    head_dim = check_integer(config.get("head_dim"), "head_dim")
    if head_dim % 2:
        raise ConfigError(f"head_dim: {head_dim} is odd (RoPE turns pairs of features)")
    try:
        a1, a2, s1, s2 = check_kernel(config.get("kernel"))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    base = positive_number(config.get("rope_theta"), "rope_theta")
    seq_len = check_integer(config.get("seq_len"), "seq_len", 9, "eight positions and the last")
    params = {"head_dim": head_dim, "rotary_dim": head_dim, "base": base, "layout": LAYOUT,
              "kernel": {"a1": a1, "a2": a2, "s1": s1, "s2": s2}}
    return [Setting("all", params, seq_len, ("layout interleaved: the document's pairs (x_2i, x_2i+1); "
                                              "the record has no layout field",))]
