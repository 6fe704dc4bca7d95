"""Bug: the logits are not divided by sqrt(head_dim) (SDPA called with scale=1, as code that
pre-scaled q once and then dropped that line does).

Adapter: forward (attention.forward). Expected diagnosis: ``attention-scale-missing``.
"""

from pathlib import Path

import torch

from conformance.loader import load_target

CODE = "attention-scale-missing"
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
    return part["output"](q, k, v, mask, weights, spec, scale=1.0)  # BUG: no 1/sqrt(d)
