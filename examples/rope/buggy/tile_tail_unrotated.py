"""Bug: a tiled kernel leaves the last partial tile of 64 tokens unrotated.

Sequences of up to one tile take a single-tile path and are right; longer ones are processed in
tiles of 64 tokens and the tail (seq mod 64 tokens) is never visited. The catalog's sequences are
short, so it passes them; the shape matrix's lengths 65, 113, 127, 129 and 1000 catch it.
Expected diagnosis: ``tile-tail-unrotated``.
"""

import torch

from conformance import Unsupported

CODE = "tile-tail-unrotated"
PROTOCOL = "rope.apply"
OPTIONS = {"shapes": "full", "cases": "rope.apply/fresh/shape-seq-*"}
TILE = 64


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
    s = x.shape[1]
    if s <= TILE:
        return _rotate(x, positions, spec)
    out = x.clone()
    for start in range(0, s - TILE + 1, TILE):  # BUG: the partial tail tile is never visited
        out[:, start:start + TILE] = _rotate(x[:, start:start + TILE], positions[:, start:start + TILE], spec)
    return out
