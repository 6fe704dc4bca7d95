"""M-RoPE as Hugging Face's Qwen2-VL and Qwen3-VL compute it, written for the protocol.

One float32 ladder inv_freq = 1 / base ** (arange(0, r, 2) / r); per stream (t, h, w) the angles
positions[k] * inv_freq. Qwen2-VL (variant "qwen2") takes consecutive slices of the ladder from the
streams (mrope_section [16, 24, 24]: pairs 0-15 from t, 16-39 from h, 40-63 from w); Qwen3-VL
("qwen3", apply_interleaved_mrope) interleaves them (pair i from h when i % 3 == 1, from w when
i % 3 == 2, within 3 * section). Then rotate_half, as both models do.

Adapters: ``apply`` (mrope.apply), ``positions`` (mrope.positions: get_rope_index for images).
"""

import torch

from conformance import Unsupported


def stream_angles(positions, spec):
    """[3, b, s, r/2] float32 angles of each stream."""
    r = spec.rotary_dim
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2, dtype=torch.int64, device=positions.device).float() / r))
    return positions[..., None].float() * inv_freq


def select(angles, spec, variant=None):
    """[b, s, r/2]: each pair's angle from its stream."""
    variant = variant or spec.variant
    sec = list(spec.mrope_section)
    if variant == "qwen2":
        chunks = angles.split(sec, dim=-1)
        return torch.cat([chunk[k] for k, chunk in enumerate(chunks)], dim=-1)
    out = angles[0].clone()
    for k, offset in ((1, 1), (2, 2)):
        idx = slice(offset, 3 * sec[k], 3)
        out[..., idx] = angles[k][..., idx]
    return out


def rotate(x, angles, spec):
    if spec.layout != "half":
        raise Unsupported("rotate_half only, as Qwen2-VL and Qwen3-VL")
    r = spec.rotary_dim
    emb = torch.cat((angles, angles), dim=-1)[:, :, None, :]
    x_rot = x[..., :r].float()
    x1, x2 = x_rot.chunk(2, dim=-1)
    out = x_rot * emb.cos() + torch.cat((-x2, x1), dim=-1) * emb.sin()
    return torch.cat((out, x[..., r:].float()), dim=-1).to(x.dtype)


def apply(x, positions, spec):
    return rotate(x, select(stream_angles(positions, spec), spec), spec)


def positions(token_types, grids, spec):
    """Qwen2-VL's get_rope_index for images, as a user would port it: [3, b, s] int64."""
    out = torch.zeros((3,) + tuple(token_types.shape), dtype=torch.int64)
    image = 0
    for b in range(token_types.shape[0]):
        nxt, s = 0, 0
        while s < token_types.shape[1]:
            if int(token_types[b, s]) == 0:
                out[:, b, s] = nxt
                nxt, s = nxt + 1, s + 1
                continue
            t, h, w = (int(v) for v in grids[image])
            k = torch.arange(t * h * w)
            block = torch.stack((k // (h * w), (k // w) % h, k % w)) + nxt
            out[:, b, s:s + t * h * w] = block
            nxt = int(block.max()) + 1
            image, s = image + 1, s + t * h * w
    return out.to(token_types.device)
