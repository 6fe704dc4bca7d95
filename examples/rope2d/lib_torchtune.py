"""torchtune's ``VisionRotaryPositionalEmbeddings`` (torchtune.modules, the 2-D RoPE of its CLIP
vision encoder), graded as axial 2-D RoPE. Graded at torchtune 0.6.1.

The module is built for one tile of an N x N patch grid (``patch_size=1, tile_size=N,
max_num_tiles=1, dim=d/2``, the CLS token first: ``append_cls_token=False``) and rotates a whole
tile: [b, 1 + N^2, heads, d], patch k at x = k mod N, y = k div N. Its ladder is base ** -(arange(0,
d/2, 2) / (d/2)) in float32 (base^(-4k/d) on both axes), the angles (x + 1) theta for the first d/4
pairs and (y + 1) theta for the last d/4 (the coordinates counted from 1, as Meta's Llama 3.2
vision reference counts them), pairs (2i, 2i+1) (the interleaved layout), the CLS token's angles
zeroed. The adapter places each token of the case in its patch's slot of a tile (CLS tokens in the
CLS slot; tokens that share a slot in separate calls), calls the module and reads the slots back.
The spec's order picks which coordinate is the grid's x. Grids past LIMIT patches, the half
layout and RoPE-Mixed are not what it computes here: Unsupported.

Adapter: ``vision`` (rope2d.apply; not named ``apply``: the seed sweep of
tests/core/test_seed_sweep.py grades every ``apply`` as correct code, and this one deviates by
its library's convention, which tests/rope2d asserts by name). Needs ``torchtune`` and a ``torchao`` it can import (the
``test`` extra); the tests skip without them.
"""

import torch
from torchtune.modules import VisionRotaryPositionalEmbeddings

from conformance import Unsupported

LIBRARY = ("torchtune", "torchao")
SURVEY = [("rope2d.apply", "vision")]
SURVEY_NOTES = {"rope2d.apply": "A convention, not a bug: torchtune counts patch coordinates from 1 (as Meta's "
                                "Llama 3.2 vision code does) where axial 2-D RoPE counts from 0 (coordinate-offset); "
                                "the half-layout, RoPE-Mixed and past-2^16-patch cases are unsupported."}

LIMIT = 1 << 16  # patches in the tile the module is built for


def vision(x, coords, spec):
    if spec.freqs is not None:
        raise Unsupported("torchtune's vision RoPE has fixed frequencies: no RoPE-Mixed")
    if spec.layout != "interleaved":
        raise Unsupported("torchtune rotates pairs (2i, 2i+1): interleaved layout only")
    gx, gy = (coords[..., 1], coords[..., 0]) if tuple(spec.order) == ("y", "x") else (coords[..., 0], coords[..., 1])
    b, s, heads, d = x.shape
    patches = coords[:, spec.cls_tokens:]
    n = int(patches.max()) + 1 if patches.numel() else 1
    if n * n > LIMIT:
        raise Unsupported(f"torchtune's vision RoPE would be built for a {n} x {n} patch tile")
    rope = VisionRotaryPositionalEmbeddings(patch_size=1, tile_size=n, max_num_tiles=1, dim=d // 2, base=spec.base,
                                            append_cls_token=False).to(x.device)
    slot = 1 + gy * n + gx  # the token's place in the tile
    slot[:, :spec.cls_tokens] = 0
    out = torch.empty_like(x)
    for row in range(b):
        left = list(range(s))
        while left:  # one call per set of tokens with distinct slots
            taken, rest = {}, []
            for t in left:
                key = int(slot[row, t])
                if key in taken:
                    rest.append(t)
                else:
                    taken[key] = t
            idx = torch.tensor(list(taken), device=x.device)
            tokens = torch.tensor(list(taken.values()), device=x.device)
            tile = x.new_zeros(1, 1 + n * n, heads, d)
            tile[0, idx] = x[row, tokens]
            out[row, tokens] = rope(tile)[0, idx]
            left = rest
    return out
