"""Bug: a fused kernel rotates only batch row 0 when every row holds one token.

Re-enacts a documented bug of a public array library's fused RoPE: at a continuous-batching
decode step (B > 1 rows of one token each, each at its own position) only row 0 was rotated and
the other rows came back unchanged. Prefill (seq > 1) and batch-1 decode are right, so it passes
every catalog case; the shape matrix's batched-decode cases and the black-box checks at a decode
shape catch it. Expected diagnosis: ``batch-row-zero-only``.
"""

import torch

from conformance import Unsupported

CODE = "batch-row-zero-only"
PROTOCOL = "rope.apply"
# Graded on the batched-decode cases of the shape matrix (and the black-box checks).
OPTIONS = {"shapes": "full", "cases": "rope.apply/fresh/shape-decode-*"}


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def _rotate(x, positions, spec):
    r = spec.rotary_dim
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2, device=x.device).float() / r))
    freqs = positions[..., None].float() * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)[:, :, None, :]
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    x_rot = x[..., :r]
    return torch.cat((x_rot * cos + rotate_half(x_rot) * sin, x[..., r:]), dim=-1)


def apply(x, positions, spec):
    if spec.layout != "half" or getattr(spec, "tensor_layout", "bshd") != "bshd":
        raise Unsupported("half layout, x [b, s, h, d] only")
    if spec.scaling is not None:
        raise Unsupported("no RoPE scaling")
    if x.shape[1] == 1 and x.shape[0] > 1:
        # BUG: the single-token path launches over one row; rows 1.. are copied through.
        out = x.clone()
        out[:1] = _rotate(x[:1], positions[:1], spec)
        return out
    return _rotate(x, positions, spec)
