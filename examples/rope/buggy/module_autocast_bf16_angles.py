"""Bug: a rotary nn.Module that computes its angles as HF's matrix product
``inv_freq_expanded @ position_ids_expanded`` without the ``torch.autocast(enabled=False)`` block
HF wraps it in. In a mixed-precision training step (torch.autocast(bfloat16)) the product runs in
bfloat16: above position 256 neighbouring positions share one angle.

Right without autocast: rope.module passes it. Graded with ``--autocast bfloat16`` (every step of
the script runs inside autocast) the output arrives in x's dtype and is off by whole radians. Half
layout, whole head, no scaling (other specs: Unsupported). Expected diagnosis: ``angle-precision``.
"""

import torch

from conformance import Unsupported

# What posref must report for this file, graded as <file>:module on the rope.module catalog
# (tests/test_family_contract.py checks it).
CODE = "angle-precision"
PROTOCOL = "rope.module"
OPTIONS = {"autocast": "bfloat16", "fresh": False}


class Rotary(torch.nn.Module):
    def __init__(self, dim, base):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / base ** (torch.arange(0, dim, 2).float() / dim), persistent=False)

    def forward(self, x, positions):
        inv_freq_expanded = self.inv_freq[None, :, None].expand(positions.shape[0], -1, 1)
        # BUG: HF computes this product inside torch.autocast(device_type, enabled=False).
        freqs = (inv_freq_expanded @ positions[:, None, :].float()).transpose(1, 2)  # [b, s, d/2]
        cos, sin = freqs.cos()[:, :, None, :].to(x.dtype), freqs.sin()[:, :, None, :].to(x.dtype)
        a, b = x.chunk(2, dim=-1)
        return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)


def module(spec):
    if spec.scaling is not None or spec.layout != "half" or spec.rotary_dim != spec.head_dim:
        raise Unsupported("unscaled RoPE, half layout, whole head only")
    return Rotary(spec.head_dim, spec.base)
