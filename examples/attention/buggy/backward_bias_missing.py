"""Bug: the learned relative-position bias is built under ``torch.no_grad()``, as a cache of
position biases often is (computed once per sequence length and reused), so T5's table (and
FIRE's MLP) get no gradient: the forward is right, every gradient of hidden and wq..wo is right,
and nothing reaches rel_bias.

Everything else is the correct example (sdpa_rope.py).

Adapter: forward (attention.forward). Expected diagnosis with --grad on the T5 cases:
``backward-missing``.
"""

from pathlib import Path

import torch

from conformance.loader import load_target

CODE = "backward-missing"
PROTOCOL = "attention.forward"
OPTIONS = {"grad": True, "fresh": False, "cases": "attention.forward/t5/*"}

_EXAMPLE = Path(__file__).resolve().parents[1] / "sdpa_rope.py"
part = {name: load_target(f"{_EXAMPLE}:{name}") for name in
        ("project", "encode", "with_cache", "allowed_keys", "additive_mask", "output")}


def forward(hidden, weights, positions, spec):
    b, s, _ = hidden.shape
    q, k, v = part["project"](hidden, weights, spec)
    q, k = part["encode"](q, k, positions, spec)
    k, v, past = part["with_cache"](k, v, spec)
    k_positions = torch.cat((torch.arange(past, device=positions.device).expand(b, past), positions), dim=1)
    allowed = part["allowed_keys"](b, s, past, spec, hidden.device)
    with torch.no_grad():  # BUG: the bias's learned weights are cut off from the graph
        mask = part["additive_mask"](allowed, positions, k_positions, spec, q.dtype, weights)
    return part["output"](q, k, v, mask, weights, spec)
