"""Bug: rotated in interleaved pairs (2i, 2i+1), returned de-interleaved: the rotary features come
back as the even ones first, then the odd ones ([x0', x2', ..., x1', x3', ...]). DeepSeek-V3's
Hugging Face port permutes q_pe and k_pe that way to apply rotate_half; code that forgets the
permutation is not undone (or compares against the interleaved layout) gets this output. Every
value is right, in the wrong feature slot.

Interleaved layout only (Unsupported otherwise); no scaling.
Expected diagnosis: ``output-permuted``.
"""

import torch

from conformance import Unsupported

CODE = "output-permuted"
PROTOCOL = "rope.apply"


def apply(x, positions, spec):
    if spec.layout != "interleaved" or getattr(spec, "tensor_layout", "bshd") != "bshd":
        raise Unsupported("interleaved layout, x [b, s, h, d] only")
    if spec.scaling is not None:
        raise Unsupported("no RoPE scaling")
    r = spec.rotary_dim
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2, device=x.device).float() / r))
    freqs = (positions[..., None].float() * inv_freq)[:, :, None, :]
    cos, sin = freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
    even, odd = x[..., 0:r:2], x[..., 1:r:2]
    # BUG: the rotated pairs are returned as [evens, odds], not re-interleaved.
    out = torch.cat((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
    return torch.cat((out, x[..., r:]), dim=-1)
