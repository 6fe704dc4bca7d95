"""Bug: the per-layer flag ignored, so the NoPE layer rotates its queries and keys anyway.

Adapter: apply (nope.apply). Expected diagnosis: ``nope-rope-applied``.
"""

from pathlib import Path

from conformance.loader import load_target

CODE = "nope-rope-applied"
PROTOCOL = "nope.apply"

RotaryOrNope = load_target(f"{Path(__file__).resolve().parents[1] / 'llama4_style.py'}:RotaryOrNope")


def apply(x, positions, spec):
    return RotaryOrNope(spec.head_dim, use_rope=True)(x, positions)  # BUG: use_rope ignored
