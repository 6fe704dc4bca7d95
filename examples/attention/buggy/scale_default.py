"""Bug: SDPA's default scale 1/sqrt(head_dim) kept for a layer whose logits are unscaled (T5: q . k
+ bias; a port of T5 to ``scaled_dot_product_attention`` must pass ``scale=1``). Right wherever the
layer does scale by 1/sqrt(head_dim).

Adapter: forward (attention.forward). Expected diagnosis: ``attention-scale-wrong``.
"""

from pathlib import Path

from conformance.loader import load_target

CODE = "attention-scale-wrong"
PROTOCOL = "attention.forward"

correct = load_target(f"{Path(__file__).resolve().parents[1] / 'sdpa_rope.py'}:forward")


def forward(hidden, weights, positions, spec):
    return correct(hidden, weights, positions, spec, scale=spec.head_dim ** -0.5)  # BUG: not spec.scale
