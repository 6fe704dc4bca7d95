"""Bug: RoPE first, then the QK-norm (the two steps of Qwen3Attention swapped: apply_rotary_pos_emb
on the projected q and k, q_norm and k_norm after). A rotation keeps each head's norm, so with a
uniform weight the result would be the same; with a trained, non-uniform weight the weight meets
rotated features.

Adapter: qk_norm (rope.qk_norm). Expected diagnosis: ``norm-after-rope``.
"""

from pathlib import Path

from conformance.loader import load_target

CODE = "norm-after-rope"
PROTOCOL = "rope.qk_norm"

_EXAMPLE = Path(__file__).resolve().parents[1] / "qk_norm_transformers.py"
_rope = load_target(f"{_EXAMPLE}:rope")
_norm = load_target(f"{_EXAMPLE}:_norm")


def qk_norm(q, k, positions, q_weight, k_weight, spec):
    q, k = _rope(q, k, positions, spec)  # BUG: RoPE before the norm
    return _norm(q, q_weight, spec), _norm(k, k_weight, spec)
