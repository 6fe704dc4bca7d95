"""lucidrains' rotary-embedding-torch axial RoPE, ``RotaryEmbedding(dim=d/2).get_axial_freqs(H, W)`` +
``apply_rotary_emb`` (the README's "Axial Rotary Embeddings" recipe for images), graded as axial
2-D RoPE. Graded at rotary-embedding-torch 0.9.1.

With ``freqs_for="lang"`` and dim = d/2 the module's frequencies are theta ** -(arange(0, d/2, 2) /
(d/2)) in float32: base^(-4k/d), the same ladder on both axes. ``get_axial_freqs(H, W)`` gives the
angles of arange(H) on the first d/2 features and of arange(W) on the last d/2, each frequency
repeated twice (pairs (2i, 2i+1): the interleaved layout), a dense [H, W, d] grid the adapter
reads at each token's coordinates; ``apply_rotary_emb(freqs, x)`` rotates in float32 and casts
back. The spec's order picks which coordinate indexes the grid's first axis; leading CLS tokens
get (0, 0), a rotation by 0. The grid is dense: past LIMIT entries (2^22) the adapter raises
Unsupported rather than allocate it. The half layout and RoPE-Mixed are not what it computes:
Unsupported. (The library's ``freqs_for="pixel"`` grid, linspace(-1, 1) positions with
frequencies linspace(1, max_freq / 2) pi, is another encoding that posref has no protocol for.)

Adapter: ``apply`` (rope2d.apply). Needs ``rotary-embedding-torch`` (the ``test`` extra); the
tests skip without it.
"""

from rotary_embedding_torch import RotaryEmbedding, apply_rotary_emb

from conformance import Unsupported

LIBRARY = "rotary-embedding-torch"
SURVEY = [("rope2d.apply", "apply")]
SURVEY_NOTES = {"rope2d.apply": "The axial recipe rotates pairs (2i, 2i+1) from a dense grid: the half-layout, "
                                "RoPE-Mixed and past-2^22-entry cases are unsupported."}

LIMIT = 1 << 22  # grid entries (H x W) the dense axial grid may hold here


def apply(x, coords, spec):
    if spec.freqs is not None:
        raise Unsupported("the axial recipe's frequencies are fixed: no RoPE-Mixed")
    if spec.layout != "interleaved":
        raise Unsupported("rotary-embedding-torch rotates pairs (2i, 2i+1): interleaved layout only")
    first, second = (coords[..., 1], coords[..., 0]) if tuple(spec.order) == ("y", "x") else \
        (coords[..., 0], coords[..., 1])
    first, second = first.clone(), second.clone()
    first[:, :spec.cls_tokens] = 0  # a rotation by 0 leaves the CLS tokens as they are
    second[:, :spec.cls_tokens] = 0
    height, width = int(first.max()) + 1, int(second.max()) + 1
    if height * width > LIMIT:
        raise Unsupported(f"the dense axial grid would need {height} x {width} entries")
    rotary = RotaryEmbedding(dim=spec.head_dim // 2, theta=spec.base).to(x.device)
    grid = rotary.get_axial_freqs(height, width)  # [H, W, d]
    freqs = grid[first, second]  # [b, s, d]
    return apply_rotary_emb(freqs[:, :, None, :], x)
