"""Bug: dynamic NTK scaling computed once, statically, at the full factor: the base is
b * factor**(r/(r-2)) whatever the sequence length, where dynamic NTK keeps the default base up to
the original length and grows it with seq_len past it.

Other scalings are refused (Unsupported). Adapter: apply (rope.apply), cache (rope.cache).
Expected diagnosis: ``scaling-mismatch`` ("static NTK (factor 2.0) used where dynamic NTK is
expected").
"""

from pathlib import Path

import torch

from conformance import Unsupported
from conformance.loader import load_target

# x * cos + rotate_half(x) * sin, as the correct HF-style example applies its tables
apply_tables = load_target(f"{Path(__file__).resolve().parents[1] / 'hf_rotate_half.py'}:apply_tables")

# What posref must report for this file, graded as <file>:apply on the rope.apply catalog
# (tests/test_family_contract.py checks it).
CODE = "scaling-mismatch"
PROTOCOL = "rope.apply"


def cache(positions, spec):
    scaling = dict(spec.scaling or {})
    if scaling.get("rope_type", scaling.get("type")) != "dynamic":
        raise Unsupported("dynamic NTK cases only")
    r = spec.rotary_dim
    base = spec.base * scaling["factor"] ** (r / (r - 2))  # BUG: ignores seq_len
    inv = 1.0 / (base ** (torch.arange(0, r, 2).float() / r))
    freqs = positions[..., None].float() * inv
    return freqs.cos(), freqs.sin()


def apply(x, positions, spec):
    return apply_tables(x, *cache(positions, spec), spec)
