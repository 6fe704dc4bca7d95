"""mistral-inference's Pixtral vision RoPE, ``precompute_freqs_cis_2d`` + ``apply_rotary_emb``
(mistral_inference.rope), graded as axial 2-D RoPE. Graded at mistral_inference 1.6.0, installed
with ``pip install --no-deps mistral_inference``; ``mistral_inference.rope`` needs only torch and is
imported as its users import it.

``precompute_freqs_cis_2d(dim, height, width, theta)`` builds the fine ladder theta_j = 1 /
theta ** (arange(0, dim, 2) / dim) in float32 and gives the first d/4 pairs h * theta_{2k} and the
last d/4 w * theta_{2k+1}, complex64 by ``torch.polar``: a dense [height, width, d/2] table the
vision encoder indexes at each patch's (row, column). The columns' ladder is therefore
theta^(-(4k+2)/d), not the rows' theta^(-4k/d) that axial 2-D RoPE gives both axes: posref names
this ``ladder-split`` (transformers' PixtralRotaryEmbedding splits it the same way).
``apply_rotary_emb`` multiplies pairs (2i, 2i+1) as complex numbers in float32: the interleaved
layout. The table's first axis is the coordinate of the first d/4 pairs: the spec's order picks
which of (x, y) indexes it (Pixtral: rows, y first). Leading CLS tokens get (0, 0), a rotation by
0. The table is dense: past LIMIT entries (2^22) the adapter raises Unsupported rather than
allocate it. The half layout and RoPE-Mixed are not what it computes: Unsupported.

Adapter: ``pixtral`` (rope2d.apply; not named ``apply``: the seed sweep of
tests/core/test_seed_sweep.py grades every ``apply`` as correct code, and this one deviates by
its library's convention, which tests/rope2d asserts by name). Needs ``mistral_inference`` (pip
install --no-deps); the tests skip without it.
"""

import torch
from mistral_inference.rope import apply_rotary_emb, precompute_freqs_cis_2d

from conformance import Unsupported

LIBRARY = "mistral_inference"
SURVEY = [("rope2d.apply", "pixtral")]
SURVEY_NOTES = {"rope2d.apply": "A documented convention, not a bug: Pixtral splits one ladder theta^(-2j/d) "
                                "between the axes (even steps to rows, odd steps to columns: ladder-split) where "
                                "axial 2-D RoPE (RoPE-ViT, Qwen2-VL) turns both axes by the same theta^(-4k/d); "
                                "the half-layout, RoPE-Mixed and past-2^22-patch cases (a dense table) are "
                                "unsupported."}

LIMIT = 1 << 22  # table entries (height x width) the dense 2-D table may hold here


def pixtral(x, coords, spec):
    if spec.freqs is not None:
        raise Unsupported("Pixtral's frequencies are fixed: no RoPE-Mixed")
    if spec.layout != "interleaved":
        raise Unsupported("Pixtral rotates pairs (2i, 2i+1): interleaved layout only")
    first, second = (coords[..., 1], coords[..., 0]) if tuple(spec.order) == ("y", "x") else \
        (coords[..., 0], coords[..., 1])
    first, second = first.clone(), second.clone()
    first[:, :spec.cls_tokens] = 0  # a rotation by 0 leaves the CLS tokens as they are
    second[:, :spec.cls_tokens] = 0
    height, width = int(first.max()) + 1, int(second.max()) + 1
    if height * width > LIMIT:
        raise Unsupported(f"Pixtral's dense table would need {height} x {width} entries")
    table = precompute_freqs_cis_2d(spec.head_dim, height, width, spec.base).to(x.device)
    out = []
    for b in range(x.shape[0]):
        freqs = table[first[b], second[b]]  # [s, d/2]
        out.append(apply_rotary_emb(x[b], x[b], freqs)[0])
    return torch.stack(out)
