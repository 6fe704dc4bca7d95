"""A correct M-RoPE decode session in plain torch (protocol mrope.decode).

``decode(spec)`` returns a session. ``prefill(token_types, grids)`` lays the prompt out as
Qwen2-VL's get_rope_index does (text continues the running index; an image block of h x w tokens
starting at index n gets t = n, h = n + row, w = n + column; text resumes at the block's
max + 1) and stores, per row, delta_r = max(positions of row r) + 1 - prompt length.
``decode(cache_position)`` returns t = h = w = cache_position + delta_r for every row. A new
prefill replaces the deltas: each generation decodes with its own prompt's.
"""

import torch


def _row_positions(types, grids):
    """[3, s] positions of one row, consuming its image grids from the iterator ``grids``."""
    out, nxt, s = [], 0, 0
    while s < types.shape[0]:
        if types[s] == 0:
            out.append(torch.full((3, 1), nxt, dtype=torch.int64))
            nxt, s = nxt + 1, s + 1
            continue
        t, h, w = (int(v) for v in next(grids))
        k = torch.arange(t * h * w)
        block = torch.stack([k // (h * w), (k // w) % h, k % w]) + nxt
        out.append(block)
        nxt, s = int(block.max()) + 1, s + t * h * w
    return torch.cat(out, dim=1)


class Session:
    def __init__(self, spec):
        self.spec = spec
        self.deltas = None

    def prefill(self, token_types, grids):
        pending = iter(grids.tolist())
        rows = [_row_positions(row, pending) for row in token_types]
        positions = torch.stack(rows, dim=1)  # [3, b, s]
        self.deltas = positions.amax(dim=(0, 2)) + 1 - token_types.shape[1]  # recomputed for every prompt
        return positions

    def decode(self, cache_position):
        pos = cache_position + self.deltas  # [b]
        return pos.view(1, -1, 1).expand(3, -1, 1).clone()


def decode(spec):
    return Session(spec)
