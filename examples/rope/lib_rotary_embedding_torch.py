"""lucidrains' rotary-embedding-torch (RotaryEmbedding + apply_rotary_emb), graded through a thin
adapter as a user would write it.

The library pairs features (2i, 2i+1) (interleaved layout) and supports partial rotary (it rotates
the first ``dim`` features). ``apply`` is the rope.apply adapter; ``module`` the rope.module
factory (``RotaryEmbedding`` held in a module, called step after step). Needs
``rotary-embedding-torch`` (the ``test`` extra); the tests skip without it.
"""

import torch
from rotary_embedding_torch import RotaryEmbedding, apply_rotary_emb

from conformance import Unsupported

# posref survey (docs/compatibility.md): the distribution this module wraps and its rows,
# (protocol, function[, conform options the library's convention needs]).
LIBRARY = "rotary-embedding-torch"
SURVEY = [
    ("rope.apply", "apply"),
    ("rope.module", "module"),
]
SURVEY_NOTES = {
    "module": "The library keeps freqs as a Parameter, so module.to(bfloat16) rounds the frequencies "
              "and then casts the positions to bfloat16 too: the cast scripts fail in bfloat16 with "
              "angle-precision; the others pass.",
}


def apply(x, positions, spec):
    if getattr(spec, "tensor_layout", "bshd") != "bshd":
        raise Unsupported("x [batch, seq, heads, head_dim] only")
    if spec.layout != "interleaved":
        raise Unsupported("rotary-embedding-torch pairs (2i, 2i+1): interleaved layout only")
    if spec.scaling is not None:
        raise Unsupported("only unscaled RoPE is wired up in this adapter")
    if spec.rotary_dim < 4:
        # posref found this: the library computes dim / (dim - 2) (NTK rescaling) at construction,
        # which divides by zero for a single rotated pair.
        raise Unsupported("rotary-embedding-torch cannot be built with dim 2 (ZeroDivisionError)")
    rotary = RotaryEmbedding(dim=spec.rotary_dim, theta=spec.base).to(x.device)
    freqs = rotary(positions)  # [b, s, rotary_dim], angles repeated per pair
    return apply_rotary_emb(freqs[:, :, None, :], x)


class _Module(torch.nn.Module):
    """The library's RotaryEmbedding as a model holds it: ``rotary(positions)`` gives the angles
    (float32 ``positions * freqs``, repeated per pair), ``apply_rotary_emb`` rotates the first
    ``dim`` features of x [b, s, h, d] and passes the rest through. ``freqs`` is an
    ``nn.Parameter`` (``requires_grad=False``), so ``module.to(dtype)`` casts it with the model,
    and the positions are then cast to that dtype too (``t.type(self.freqs.dtype)``)."""

    def __init__(self, spec):
        super().__init__()
        self.rotary = RotaryEmbedding(dim=spec.rotary_dim, theta=spec.base)

    def forward(self, x, positions):
        freqs = self.rotary(positions)
        return apply_rotary_emb(freqs[:, :, None, :], x)


def module(spec):
    """rope.module adapter (the factory): interleaved layout, unscaled, partial rotary allowed."""
    if spec.layout != "interleaved":
        raise Unsupported("rotary-embedding-torch pairs (2i, 2i+1): interleaved layout only")
    if spec.scaling is not None:
        raise Unsupported("rotary-embedding-torch has no HF-style scaling (only theta_rescale_factor)")
    if spec.rotary_dim < 4:
        raise Unsupported("rotary-embedding-torch cannot be built with dim 2 (ZeroDivisionError)")
    return _Module(spec)
