"""Bug: every token, image tokens too, gets its token index in all three streams (t = h = w =
index), as when a model's M-RoPE path is fed the default 1-D position ids because nothing calls
``get_rope_index`` (Liger kernel's Qwen2-VL forward did so): the image block is not laid out on its
grid and the text after it does not resume at the block's max + 1.

Adapter: positions (mrope.positions). Expected diagnosis: ``positions-1d``.
"""

import torch

CODE = "positions-1d"
PROTOCOL = "mrope.positions"


def positions(token_types, grids, spec):
    index = torch.arange(token_types.shape[1], dtype=torch.int64).expand_as(token_types)
    return index[None].expand(3, -1, -1).clone()  # BUG: 1-D positions in every stream
