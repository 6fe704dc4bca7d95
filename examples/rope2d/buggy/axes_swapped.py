"""Bug: the two axes exchanged (the first d/4 pairs read the row where they must read the column).

Adapter: apply (rope2d.apply). Expected diagnosis: ``axes-swapped``.
"""

from pathlib import Path

from conformance.loader import load_target

CODE = "axes-swapped"
PROTOCOL = "rope2d.apply"

correct = load_target(f"{Path(__file__).resolve().parents[1] / 'rope_vit.py'}:apply")


def apply(x, coords, spec):
    return correct(x, coords.flip(-1), spec)  # BUG: (y, x) read as (x, y)
