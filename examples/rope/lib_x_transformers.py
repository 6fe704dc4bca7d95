"""lucidrains' x-transformers RotaryEmbedding + apply_rotary_pos_emb, graded through a thin
adapter as a user would write it.

Interleaved pairs (2i, 2i+1), partial rotary (the first ``dim`` features), tensors [b, h, s, d].
Needs ``x-transformers`` (the ``test`` extra); the tests skip without it.
"""

from x_transformers.x_transformers import RotaryEmbedding, apply_rotary_pos_emb

from conformance import Unsupported

# posref survey (docs/compatibility.md): the distribution this module wraps and its rows,
# (protocol, function[, conform options the library's convention needs]).
LIBRARY = "x-transformers"
SURVEY = [
    ("rope.apply", "apply"),
]


def apply(x, positions, spec):
    if getattr(spec, "tensor_layout", "bshd") != "bshd":
        raise Unsupported("x [batch, seq, heads, head_dim] only")
    if spec.layout != "interleaved":
        raise Unsupported("x-transformers pairs (2i, 2i+1): interleaved layout only")
    if spec.scaling is not None:
        raise Unsupported("only unscaled RoPE is wired up in this adapter")
    if spec.rotary_dim < 4:
        # posref found this: the library computes dim / (dim - 2) (NTK rescaling) at construction,
        # which divides by zero for a single rotated pair.
        raise Unsupported("x-transformers cannot be built with dim 2 (ZeroDivisionError)")
    rotary = RotaryEmbedding(spec.rotary_dim, base=spec.base).to(x.device)
    freqs, scale = rotary(positions)  # [b, s, rotary_dim]
    out = apply_rotary_pos_emb(x.transpose(1, 2), freqs, scale)
    return out.transpose(1, 2)
