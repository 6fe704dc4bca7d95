"""Bug: the YaRN attention factor is applied twice: cos and sin already carry it (HF's
attention_scaling), and the logits are multiplied by its square again as a softmax temperature
(YaRN paper eq. 21), so they carry f^4 instead of f^2.

Adapter: forward (attention.forward). Expected diagnosis: ``attention-factor-twice``.
"""

import math
from pathlib import Path

import torch

from conformance.loader import load_target

CODE = "attention-factor-twice"
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
    scaling = dict(spec.scaling or {})
    f = 0.1 * math.log(scaling["factor"]) + 1.0 if scaling.get("rope_type") == "yarn" else 1.0
    return part["output"](q, k, v, mask, weights, spec, scale=f * f * spec.scale)  # BUG: f again
