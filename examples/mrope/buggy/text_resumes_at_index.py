"""Bug: text after an image continues at its token index (as 1-D RoPE would count) instead of at
the image block's max + 1.

Adapter: positions (mrope.positions). Expected diagnosis: ``positions-resume``.
"""

from pathlib import Path

import torch

from conformance.loader import load_target

CODE = "positions-resume"
PROTOCOL = "mrope.positions"

correct = load_target(f"{Path(__file__).resolve().parents[1] / 'qwen_vl.py'}:positions")


def positions(token_types, grids, spec):
    out = correct(token_types, grids, spec)
    index = torch.arange(token_types.shape[1]).expand_as(token_types)
    text = token_types == 0
    out[:, text] = index[text]  # BUG: the token index
    return out
