"""Bug: the whole output multiplied by a constant (0.75): a rotation that is right up to a scale
on every element, the pass-through features of partial rotary included (e.g. a softmax or
norm scale folded into the wrong tensor, or a fused kernel's output scale left at a stale value).

Half layout only (Unsupported otherwise); no scaling.
Expected diagnosis: ``output-scaled`` ("every output element scaled by 0.75").
"""

import torch

from conformance import Unsupported

CODE = "output-scaled"
PROTOCOL = "rope.apply"
SCALE = 0.75


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply(x, positions, spec):
    if spec.layout != "half" or getattr(spec, "tensor_layout", "bshd") != "bshd":
        raise Unsupported("half layout, x [b, s, h, d] only")
    if spec.scaling is not None:
        raise Unsupported("no RoPE scaling")
    r = spec.rotary_dim
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2, device=x.device).float() / r))
    freqs = positions[..., None].float() * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)[:, :, None, :]
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    x_rot = x[..., :r]
    out = torch.cat((x_rot * cos + rotate_half(x_rot) * sin, x[..., r:]), dim=-1)
    return out * SCALE  # BUG
