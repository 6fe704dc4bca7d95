"""lucidrains' rotary-embedding-torch (RotaryEmbedding + apply_rotary_emb), graded through a thin
adapter as a user would write it.

The library pairs features (2i, 2i+1) (interleaved layout) and supports partial rotary (it rotates
the first ``dim`` features). Needs ``rotary-embedding-torch`` (the ``test`` extra); the tests skip
without it.
"""

from rotary_embedding_torch import RotaryEmbedding, apply_rotary_emb

from conformance import Unsupported


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
