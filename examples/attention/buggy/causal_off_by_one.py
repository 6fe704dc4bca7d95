"""Bug: the causal mask lets each query see the next token as well (key slot <= past + i + 1, a
triu with diagonal 2 instead of 1).

Adapter: forward (attention.forward). Expected diagnosis: ``attention-causal-off-by-one``.
"""

from pathlib import Path

import torch

from conformance.loader import load_target

CODE = "attention-causal-off-by-one"
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
        allowed &= torch.ones(s, past + s, dtype=torch.bool).tril(past + 1)  # BUG: diagonal past + 1, not past
    if spec.attention_mask is not None:
        allowed &= spec.attention_mask[:, None, None, :]
    mask = part["additive_mask"](allowed, positions, k_positions, spec, q.dtype, weights)
    return part["output"](q, k, v, mask, weights, spec)
