"""Bug: the angles are a matrix product, HF's ``inv_freq_expanded @ position_ids_expanded``, without
the ``torch.autocast(enabled=False)`` block HF wraps it in. Under mixed-precision training
(torch.autocast(bfloat16)) autocast runs that matmul in bfloat16: positions and inv_freq are
rounded to 8 significant bits and so is m * theta_i. At position 65536 the bfloat16 spacing is
512, so neighbouring positions collapse onto the same angle.

Right without autocast (float32 angles): posref passes it. Graded with ``--autocast bfloat16`` the
output still arrives in float32 (cos and sin are cast back to x.dtype), so float32's budget applies
and the rotation is wrong by up to hundreds of radians' worth of phase. Expected diagnosis:
``angle-precision``.
"""

import torch

from conformance import Unsupported


# What posref must report for this file, graded as <file>:apply on the rope.apply catalog
# (tests/test_family_contract.py checks it).
CODE = "angle-precision"
PROTOCOL = "rope.apply"
OPTIONS = {"autocast": "bfloat16", "cases": "rope.apply/llama2-d128/around-2p16", "fresh": False}


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply(x, positions, spec):
    if spec.layout != "half" or spec.scaling is not None:
        raise Unsupported("unscaled half-layout RoPE only")
    if getattr(spec, "tensor_layout", "bshd") != "bshd" or getattr(spec, "inplace", False):
        raise Unsupported("x [batch, seq, heads, head_dim], out of place only")
    r = spec.rotary_dim
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2, dtype=torch.int64).float() / r))
    inv_freq_expanded = inv_freq[None, :, None].expand(positions.shape[0], -1, 1).to(x.device)
    position_ids_expanded = positions[:, None, :].float()
    # BUG: HF computes this product inside torch.autocast(device_type, enabled=False).
    freqs = (inv_freq_expanded @ position_ids_expanded).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos = emb.cos()[:, :, None, :].to(x.dtype)
    sin = emb.sin()[:, :, None, :].to(x.dtype)
    x_rot, x_pass = x[..., :r], x[..., r:]
    return torch.cat((x_rot * cos + rotate_half(x_rot) * sin, x_pass), dim=-1)
