"""Meta Llama style RoPE: ``freqs_cis`` as complex numbers, interleaved pairs (2i, 2i+1).

As in meta-llama's ``precompute_freqs_cis`` / ``apply_rotary_emb``: theta_i = base ** (-2i / r)
and the angles in float32, ``freqs_cis = polar(1, angles)``, x viewed as r/2 complex numbers
x[2i] + 1j * x[2i+1], multiplied by freqs_cis in complex64, viewed back as real and cast to
x.dtype. Partial rotary: the features past ``spec.rotary_dim`` pass through.
"""

import torch

from conformance import Unsupported


def freqs_cis(positions, spec):
    r = spec.rotary_dim
    freqs = 1.0 / (spec.base ** (torch.arange(0, r, 2, device=positions.device)[: r // 2].float() / r))
    angles = positions[..., None].float() * freqs  # [batch, seq, r/2]
    return torch.polar(torch.ones_like(angles), angles)


def apply(x, positions, spec):
    if getattr(spec, "tensor_layout", "bshd") != "bshd":
        raise Unsupported("x [batch, seq, heads, head_dim] only")
    if spec.layout != "interleaved":
        raise Unsupported("the complex form pairs (2i, 2i+1): interleaved layout only")
    if spec.scaling:
        raise Unsupported("precompute_freqs_cis here has no long-context scaling")
    r = spec.rotary_dim
    x_rot = x[..., :r].float().reshape(*x.shape[:-1], r // 2, 2)
    x_complex = torch.view_as_complex(x_rot.contiguous())
    rotated = x_complex * freqs_cis(positions, spec)[:, :, None, :]
    out = torch.view_as_real(rotated).flatten(3).type_as(x)
    return torch.cat((out, x[..., r:]), dim=-1)
