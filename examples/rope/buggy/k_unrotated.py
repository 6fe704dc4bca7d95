"""Bug: a fused q/k kernel skips k when it has a single KV head (multi-query attention).

The kernel rotates q and k in one launch over max(heads, kv_heads) and guards the k store with
``kv_heads > 1``; with one KV head k comes back exactly as it went in. Grouped-query cases with
several KV heads are right. Expected diagnosis: ``k-unrotated``.
"""

import torch

from conformance import Unsupported

CODE = "k-unrotated"
PROTOCOL = "rope.apply_qk"


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def _rotate(x, cos, sin, r):
    x_rot = x[..., :r]
    return torch.cat((x_rot * cos + rotate_half(x_rot) * sin, x[..., r:]), dim=-1)


def apply_qk(q, k, positions, spec):
    if spec.layout != "half" or getattr(spec, "tensor_layout", "bshd") != "bshd":
        raise Unsupported("half layout, [b, s, h, d] only")
    if spec.scaling is not None:
        raise Unsupported("no RoPE scaling")
    r = spec.rotary_dim
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2, device=q.device).float() / r))
    freqs = positions[..., None].float() * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)[:, :, None, :]
    cos, sin = emb.cos().to(q.dtype), emb.sin().to(q.dtype)
    q_rot = _rotate(q, cos, sin, r)
    k_rot = _rotate(k, cos, sin, r) if k.shape[2] > 1 else k.clone()  # BUG: one KV head is skipped
    return q_rot, k_rot
