"""Axial 2-D RoPE as RoPE-ViT and Qwen2-VL's vision encoder compute it, written for the protocol:
a float32 ladder theta_k = 1 / base ** (arange(0, d/2, 2) / (d/2)) shared by both axes, the first
d/4 pairs at the first coordinate of spec.order and the last d/4 at the other, cos/sin expanded
for spec.layout, leading CLS tokens passed through. RoPE-Mixed (spec.freqs given): pair i of
head h turns by x f_x[h][i] + y f_y[h][i].

Adapter: ``apply`` (rope2d.apply).
"""

import torch


def ladder(spec, width=None):
    width = width or spec.head_dim // 2
    return 1.0 / (spec.base ** (torch.arange(0, width, 2).float() / width))


def angles(coords, spec):
    """[b, s, d/2] (axial: the first d/4 pairs at the first axis, the last at the second), or
    [b, s, heads, d/2] for RoPE-Mixed (x f_x + y f_y per head)."""
    if spec.freqs is not None:
        f = torch.tensor(spec.freqs, dtype=torch.float32)  # [2, heads, d/2]
        return coords[..., 0, None, None].float() * f[0] + coords[..., 1, None, None].float() * f[1]
    c = coords.flip(-1) if tuple(spec.order) == ("y", "x") else coords
    theta = ladder(spec)
    return torch.cat((c[..., :1].float() * theta, c[..., 1:].float() * theta), dim=-1)


def rotate(x, ang, spec, cls_tokens=None):
    cls_tokens = spec.cls_tokens if cls_tokens is None else cls_tokens
    if ang.dim() == 3:
        ang = ang[:, :, None, :]  # the same angles for every head
    if spec.layout == "interleaved":
        cos = torch.repeat_interleave(ang.cos(), 2, dim=-1)
        sin = torch.repeat_interleave(ang.sin(), 2, dim=-1)
        turned = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)
    else:
        cos = torch.cat((ang.cos(), ang.cos()), dim=-1)
        sin = torch.cat((ang.sin(), ang.sin()), dim=-1)
        x1, x2 = x.chunk(2, dim=-1)
        turned = torch.cat((-x2, x1), dim=-1)
    out = x.float() * cos + turned.float() * sin
    out[:, :cls_tokens] = x[:, :cls_tokens].float()
    return out.to(x.dtype)


def apply(x, coords, spec):
    return rotate(x, angles(coords, spec), spec)
