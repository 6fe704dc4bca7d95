"""M-RoPE decode positions: the (t, h, w) of tokens generated after a multimodal prompt.

A prompt of s tokens has the 3-D positions P [3, batch, s] of get_rope_index
(reference.mrope.positions: text continues the running index, an image block of h x w tokens
spans only max(h, w) positions). Each batch row r then has one delta

    delta_r = max over k, j of P[k, r, j] + 1 - s             (HF's ``mrope_position_deltas``)

(0 for a text-only row; an image of h x w tokens lowers it by h w - max(h, w)), and the token
generated at cache position c (its index in the sequence: the prompt holds 0 .. s - 1, the first
generated token has c = s) is a text token at

    t = h = w = c + delta_r.

Each generation's deltas come from its own prompt: a new prompt (a prefill on an empty cache)
recomputes them, nothing carries over from an earlier generation. Source: transformers
``Qwen2VLModel.get_rope_index`` (the deltas) and ``compute_3d_position_ids`` (decode:
``arange(cache_length, cache_length + 1) + rope_deltas``; recomputed when the cache is empty).

Integers throughout; never imports torch.
"""

from __future__ import annotations

import numpy as np

from reference.mrope.positions import rope_index


def deltas(prompt_positions) -> np.ndarray:
    """delta_r = max(P[:, r, :]) + 1 - s per row, int64 [batch], of prompt positions P [3, b, s]."""
    p = np.asarray(prompt_positions, dtype=np.int64)
    if p.ndim != 3 or p.shape[0] != 3 or p.shape[2] == 0:
        raise ValueError("prompt_positions: must be [3, batch, seq] with seq >= 1")
    return p.max(axis=(0, 2)) + 1 - p.shape[2]


def decode_positions(row_deltas, cache_positions) -> np.ndarray:
    """t = h = w = c + delta_r: int64 [3, batch, steps] for cache positions c [steps]."""
    d = np.asarray(row_deltas, dtype=np.int64).reshape(-1, 1)
    c = np.asarray(cache_positions, dtype=np.int64).reshape(1, -1)
    return np.broadcast_to(c + d, (3,) + (d.shape[0], c.shape[1])).copy()


def generation(token_types, grids, cache_positions) -> np.ndarray:
    """One generation: the prompt's positions [3, b, s] (prefill) followed by those of the tokens
    decoded at ``cache_positions`` (each >= s), int64 [3, b, s + steps]."""
    prompt = rope_index(token_types, grids)
    c = np.asarray(cache_positions, dtype=np.int64).reshape(-1)
    if c.size and c.min() < prompt.shape[2]:
        raise ValueError(f"cache_positions: a decoded token comes after the prompt (>= {prompt.shape[2]})")
    return np.concatenate([prompt, decode_positions(deltas(prompt), c)], axis=2)
