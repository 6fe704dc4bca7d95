"""Bug: an HF-style rotary module (transformers before 4.31) whose ``inv_freq`` is a persistent
buffer: ``model.to(torch.bfloat16)`` casts it (as it casts every floating buffer), and forward
turns positions by the rounded frequencies, so far positions turn by wrong angles.

Adapter: module (rope.module), cache form like HF's (cos, sin [b, s, head_dim]). Unscaled cases
only. Graded in bfloat16 (OPTIONS): cast to float32 rounds nothing. Expected diagnosis:
``angle-precision`` naming the buffer ``inv_freq``.
"""

import torch

from conformance import Unsupported

CODE = "angle-precision"
PROTOCOL = "rope.module"
OPTIONS = {"dtypes": ("bfloat16",)}


class LegacyRotaryEmbedding(torch.nn.Module):
    posref_output = "cos_sin"

    def __init__(self, dim, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq)  # persistent, and cast by .to(dtype)

    def forward(self, x, position_ids):
        freqs = position_ids[..., None].float() * self.inv_freq.float()
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def module(spec):
    if spec.scaling is not None or spec.layout != "half" or spec.rotary_dim != spec.head_dim:
        raise Unsupported("unscaled RoPE, half layout, whole head only")
    return LegacyRotaryEmbedding(spec.head_dim, spec.base)
