"""Bug: attention written out by hand (scores, softmax, weighted sum) with a custom autograd
Function for the scaled scores q k^T / sqrt(d) whose hand-written backward forgets the scale: the
forward is right, but the gradients reaching q and k (and through them hidden, wq and wk) are
sqrt(head_dim) times too large. The gradients of wv and wo are right.

Projections, RoPE, the cache and the masks come from the correct example (sdpa_rope.py); the mask
uses the dtype's most negative finite value instead of -inf, as HF's eager attention does, so a
query that sees no key gets a finite (ungraded) row instead of NaN.

Adapter: forward (attention.forward). Expected diagnosis with --grad: ``backward-scale``.
"""

from pathlib import Path

import torch
import torch.nn.functional as F

from conformance.loader import load_target

CODE = "backward-scale"
PROTOCOL = "attention.forward"
OPTIONS = {"grad": True, "fresh": False}

_EXAMPLE = Path(__file__).resolve().parents[1] / "sdpa_rope.py"
part = {name: load_target(f"{_EXAMPLE}:{name}") for name in
        ("project", "encode", "with_cache", "allowed_keys", "additive_mask", "repeat_kv")}


class ScaledScores(torch.autograd.Function):
    """(q k^T) * scale for q [b, h, s, d], k [b, h, K, d]."""

    @staticmethod
    def forward(ctx, q, k, scale):
        ctx.save_for_backward(q, k)
        return (q @ k.transpose(-1, -2)) * scale

    @staticmethod
    def backward(ctx, g):
        q, k = ctx.saved_tensors
        return g @ k, g.transpose(-1, -2) @ q, None  # BUG: both should be multiplied by the scale


def forward(hidden, weights, positions, spec):
    b, s, _ = hidden.shape
    q, k, v = part["project"](hidden, weights, spec)
    q, k = part["encode"](q, k, positions, spec)
    k, v, past = part["with_cache"](k, v, spec)
    k_positions = torch.cat((torch.arange(past, device=positions.device).expand(b, past), positions), dim=1)
    allowed = part["allowed_keys"](b, s, past, spec, hidden.device)
    mask = part["additive_mask"](allowed, positions, k_positions, spec, torch.float32, weights)
    mask = mask.clamp(min=torch.finfo(torch.float32).min)
    groups = spec.num_heads // spec.num_kv_heads
    k, v = part["repeat_kv"](k, groups), part["repeat_kv"](v, groups)
    scores = ScaledScores.apply(q, k, spec.scale)
    p = torch.softmax(scores.float() + mask, dim=-1).to(q.dtype)
    out = (p @ v).transpose(1, 2).reshape(b, s, spec.num_heads * spec.head_dim)
    return F.linear(out, weights["wo"])
