"""Bug: the YaRN attention factor is applied twice: once on cos and sin (as HF does) and again on
q and k for the softmax temperature, so every rotated pair is (0.1 ln s + 1)^2 times too large.

YaRN frequencies are computed as HF does (float32, the ramp between beta_fast and beta_slow);
other scalings are refused (Unsupported). Adapter: apply (rope.apply), cache (rope.cache).
Expected diagnosis: ``attention-factor`` ("attention factor 1.139 applied twice").
"""

import math

from pathlib import Path

import torch

from conformance import Unsupported
from conformance.loader import load_target

# x * cos + rotate_half(x) * sin, as the correct HF-style example applies its tables
apply_tables = load_target(f"{Path(__file__).resolve().parents[1] / 'hf_rotate_half.py'}:apply_tables")

# What posref must report for this file, graded as <file>:apply on the rope.apply catalog
# (tests/test_family_contract.py checks it).
CODE = "attention-factor"
PROTOCOL = "rope.apply"


def _yarn(spec):
    scaling = dict(spec.scaling or {})
    if scaling.get("rope_type", scaling.get("type")) != "yarn":
        raise Unsupported("YaRN cases only")
    if "mscale" in scaling or "attention_factor" in scaling or not scaling.get("truncate", True):
        raise Unsupported("the default YaRN attention factor and truncated ramp only")
    r, s = spec.rotary_dim, scaling["factor"]
    big_l = scaling["original_max_position_embeddings"]
    inv = 1.0 / (spec.base ** (torch.arange(0, r, 2).float() / r))

    def dim_of(n):
        return (r * math.log(big_l / (n * 2 * math.pi))) / (2 * math.log(spec.base))

    low = max(math.floor(dim_of(scaling.get("beta_fast", 32))), 0)
    high = min(math.ceil(dim_of(scaling.get("beta_slow", 1))), r - 1)
    ramp = ((torch.arange(r // 2).float() - low) / max(high - low, 0.001)).clamp(0, 1)
    factor = 0.1 * math.log(s) + 1.0
    return inv / s * ramp + inv * (1 - ramp), factor * factor  # BUG: cos/sin and softmax both


def cache(positions, spec):
    inv, factor = _yarn(spec)
    freqs = positions[..., None].float() * inv
    return freqs.cos() * factor, freqs.sin() * factor


def apply(x, positions, spec):
    return apply_tables(x, *cache(positions, spec), spec)
