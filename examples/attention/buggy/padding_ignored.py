"""Bug: the padding mask is never applied (only the causal mask is built), so padded keys get
attention weight.

Adapter: forward (attention.forward). Expected diagnosis: ``attention-padding-ignored``.
"""

from pathlib import Path

import torch

from conformance.loader import load_target

CODE = "attention-padding-ignored"
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
    allowed = torch.ones(b, 1, s, past + s, dtype=torch.bool)
    if spec.causal:
        allowed &= torch.ones(s, past + s, dtype=torch.bool).tril(past)
    # BUG: spec.attention_mask is not applied
    mask = part["additive_mask"](allowed, positions, k_positions, spec, q.dtype, weights)
    return part["output"](q, k, v, mask, weights, spec)
