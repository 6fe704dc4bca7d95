"""M-RoPE position ids of a multimodal sequence: Qwen2-VL's ``get_rope_index`` rule for images.

token_types int [batch, seq]: 0 for a text token, 1 for an image token (after the vision encoder's
spatial merge); grids int [images, 3]: (t, h, w) of each image in the order the image blocks appear
(row by row over the batch), with h * w tokens per image (t = 1 for a still image). The rule:

- a text token continues the running index: t = h = w = next;
- an image block of h x w tokens starting when the running index is s gets t = s, h = s + row,
  w = s + column (row-major);
- after the block the running index resumes at max(t, h, w over the block) + 1.

Returns int64 [3, batch, seq] (t, h, w). Source: HF transformers Qwen2VLModel.get_rope_index.
"""

from __future__ import annotations

import numpy as np


def rope_index(token_types, grids) -> np.ndarray:
    types = np.asarray(token_types)
    grid = np.asarray(grids, dtype=np.int64).reshape(-1, 3)
    if types.ndim != 2 or not np.isin(types, (0, 1)).all():
        raise ValueError("token_types: must be [batch, seq] of 0 (text) and 1 (image)")
    out = np.zeros((3,) + types.shape, dtype=np.int64)
    image = 0
    for b in range(types.shape[0]):
        nxt, s = 0, 0
        while s < types.shape[1]:
            if types[b, s] == 0:
                out[:, b, s] = nxt
                nxt, s = nxt + 1, s + 1
                continue
            if image >= grid.shape[0]:
                raise ValueError("grids: fewer grids than image blocks")
            t, h, w = (int(v) for v in grid[image])
            n = t * h * w
            if s + n > types.shape[1] or not (types[b, s:s + n] == 1).all():
                raise ValueError(f"token_types: image {image} needs {n} image tokens at row {b}, position {s}")
            k = np.arange(n)
            out[0, b, s:s + n] = nxt + k // (h * w)
            out[1, b, s:s + n] = nxt + (k // w) % h
            out[2, b, s:s + n] = nxt + k % w
            nxt = int(out[:, b, s:s + n].max()) + 1
            image, s = image + 1, s + n
    if image != grid.shape[0]:
        raise ValueError(f"grids: {grid.shape[0]} grids for {image} image blocks")
    return out
