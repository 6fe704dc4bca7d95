"""RoPE scaling types (long context), one module each, registered by ``rope_type`` as in Hugging
Face's ``ROPE_INIT_FUNCTIONS`` (modeling_rope_utils.py).

A scaling is given in HF ``rope_parameters`` form: a dict with ``rope_type`` (or the legacy
``type``) and that type's parameters, with HF's names (``factor``,
``original_max_position_embeddings``, ``beta_fast``, ...). Each type module declares:

- ``REQUIRED`` / ``OPTIONAL``: {name: checker} of its parameters (anything else is refused);
- ``frequencies(theta, r, base, params, seq_len)``: the scaled frequencies theta'_i (list of
  mpmath.mpf) and the attention factor (mpf), computed in mpmath at the caller's working
  precision from the default ladder ``theta`` (theta_i = base**(-2i/r), mpf; base an mpf), so the exact angles and correctly
  rounded golden values of default RoPE carry over to every type;
- ``SOURCE``: where the formula comes from.

The attention factor is the HF form: a multiplier on both cos and sin (``cos = emb.cos() *
attention_scaling``), which scales the attention logits by its square. A softmax temperature
(YaRN paper eq. 21, 1/sqrt(t) on q and k) is the same number applied elsewhere; the protocols
grade the multiplier form.

Types: linear, ntk, dynamic, length, yarn, llama3, longrope (and "default", no scaling).
"""

from __future__ import annotations

import importlib

import mpmath

from . import _params

TYPES = ("linear", "ntk", "dynamic", "length", "yarn", "llama3", "longrope")


def module(rope_type: str):
    """The module of a scaling type; ValueError naming the known ones for any other."""
    if rope_type not in TYPES:
        raise ValueError(f"scaling: unknown rope_type {rope_type!r}; known: default, {', '.join(TYPES)}")
    return importlib.import_module(f"{__name__}.{rope_type}")


def resolve(scaling) -> tuple[str, dict]:
    """(rope_type, checked parameters without the type key) of a scaling dict, or ("default", {})
    for None. ValueError (one line) for an unknown type, a missing or unknown key, or a bad value."""
    if scaling is None:
        return "default", {}
    if not isinstance(scaling, dict):
        raise ValueError(f"scaling: must be None or a dict with 'rope_type', got {scaling!r}")
    params = dict(scaling)
    rope_type = params.pop("rope_type", None)
    legacy = params.pop("type", None)
    rope_type = rope_type or legacy or "default"
    if rope_type == "default":
        if params:
            raise ValueError(f"scaling: rope_type 'default' takes no parameters, got {sorted(params)}")
        return "default", {}
    mod = module(rope_type)
    return rope_type, _params.check(rope_type, params, mod.REQUIRED, mod.OPTIONAL)


def exact(rope_type: str, params: dict, rotary_dim: int, base: float, seq_len):
    """(theta' list of mpf, attention factor mpf) at the current mpmath precision."""
    r = int(rotary_dim)
    b = mpmath.mpf(float(base))
    theta = [b ** (-mpmath.mpf(2 * i) / r) for i in range(r // 2)]
    if rope_type == "default":
        return theta, mpmath.mpf(1)
    mod = module(rope_type)
    _params.check_lengths(rope_type, params, r)
    return mod.frequencies(theta, r, b, params, seq_len)


__all__ = ["TYPES", "exact", "module", "resolve"]
