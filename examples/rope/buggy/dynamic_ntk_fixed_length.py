"""Bug: dynamic NTK's base computed once, at the extended length factor x original, whatever the
sequence length: base b * (s * L_max / L - (s - 1))**(r / (r - 2)) with L_max = s * L, so
b * (s**2 - s + 1)**(r / (r - 2)). vLLM's DynamicNTKScalingRotaryEmbedding builds its cos/sin
cache this way (a "static NTK" under the dynamic name); HF's dynamic NTK keeps the base up to the
original length and grows it with seq_len past it.

Other scalings are refused (Unsupported). Adapters: apply (rope.apply), cache (rope.cache).
Expected diagnosis: ``scaling-mismatch`` ("dynamic NTK's base fixed at the extended length ...").
"""

from pathlib import Path

import torch

from conformance import Unsupported
from conformance.loader import load_target

# x * cos + rotate_half(x) * sin, as the correct HF-style example applies its tables
apply_tables = load_target(f"{Path(__file__).resolve().parents[1] / 'hf_rotate_half.py'}:apply_tables")

CODE = "scaling-mismatch"
PROTOCOL = "rope.apply"


def cache(positions, spec):
    scaling = dict(spec.scaling or {})
    if scaling.get("rope_type", scaling.get("type")) != "dynamic":
        raise Unsupported("dynamic NTK cases only")
    r, s = spec.rotary_dim, scaling["factor"]
    original = scaling["original_max_position_embeddings"]
    max_len = original * s  # BUG: the cache is built once for the longest length, not seq_len
    base = spec.base * ((s * max_len / original) - (s - 1)) ** (r / (r - 2))
    inv = 1.0 / (base ** (torch.arange(0, r, 2).float() / r))
    freqs = positions[..., None].float() * inv
    return freqs.cos(), freqs.sin()


def apply(x, positions, spec):
    return apply_tables(x, *cache(positions, spec), spec)
