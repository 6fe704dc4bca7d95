"""Bug: the image block's h and w exchanged: h counts columns and w rows.

Adapter: positions (mrope.positions). Expected diagnosis: ``image-axes-swapped``.
"""

from pathlib import Path

from conformance.loader import load_target

CODE = "image-axes-swapped"
PROTOCOL = "mrope.positions"

correct = load_target(f"{Path(__file__).resolve().parents[1] / 'qwen_vl.py'}:positions")


def positions(token_types, grids, spec):
    return correct(token_types, grids[:, [0, 2, 1]], spec)[[0, 2, 1]]  # BUG: (t, w, h)
