"""Bug: SDPA's default scale 1/sqrt(head_dim) kept for a layer whose logits are unscaled (T5: q . k
+ bias; a port of T5 to ``scaled_dot_product_attention`` must pass ``scale=1``). Right wherever the
layer does scale by 1/sqrt(head_dim).

Adapter: forward (attention.forward). Expected diagnosis: ``attention-scale-wrong``.
"""

from pathlib import Path

import torch

from conformance.loader import load_target

CODE = "attention-scale-wrong"
PROTOCOL = "attention.forward"

_EXAMPLE = Path(__file__).resolve().parents[1] / "sdpa_rope.py"
part = {name: load_target(f"{_EXAMPLE}:{name}") for name in
        ("project", "encode", "with_cache", "allowed_keys", "additive_mask", "output")}


def forward(hidden, weights, positions, spec):
    b, s, _ = hidden.shape
    q, k, v = part["project"](hidden, weights, spec)
    q, k = part["encode"](q, k, positions, spec)
    k, v, past = part["with_cache"](k, v, spec)
    k_positions = torch.cat((torch.arange(past).expand(b, past), positions), dim=1)
    mask = part["additive_mask"](part["allowed_keys"](b, s, past, spec, hidden.device), positions, k_positions,
                                 spec, q.dtype, weights)
    return part["output"](q, k, v, mask, weights, spec, scale=spec.head_dim ** -0.5)  # BUG: not spec.scale
