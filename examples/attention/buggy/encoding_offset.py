"""Bug: RoPE at positions 0..s-1 of the current call instead of the given positions: in decode
the new tokens are rotated as if the KV cache were empty (the cache offset is lost).

Adapter: forward (attention.forward). Expected diagnosis: ``attention-encoding``.
"""

from pathlib import Path

import torch

from conformance.loader import load_target

CODE = "attention-encoding"
PROTOCOL = "attention.forward"

_EXAMPLE = Path(__file__).resolve().parents[1] / "sdpa_rope.py"
part = {name: load_target(f"{_EXAMPLE}:{name}") for name in
        ("project", "encode", "with_cache", "allowed_keys", "additive_mask", "output")}


def forward(hidden, weights, positions, spec):
    b, s, _ = hidden.shape
    q, k, v = part["project"](hidden, weights, spec)
    q, k = part["encode"](q, k, torch.arange(s).expand(b, s), spec)  # BUG: ignores positions
    k, v, past = part["with_cache"](k, v, spec)
    k_positions = torch.cat((torch.arange(past).expand(b, past), positions), dim=1)
    mask = part["additive_mask"](part["allowed_keys"](b, s, past, spec, hidden.device), positions, k_positions,
                                 spec, q.dtype, weights)
    return part["output"](q, k, v, mask, weights, spec)
