"""Bug: patch coordinates counted from 1, as torchtune's vision RoPE and Llama 4's vision encoder
number their patches (position 0 reserved for the CLS token), where the case's coordinates are the
patches' own 0-based (x, y).

Adapter: apply (rope2d.apply). Expected diagnosis: ``coordinate-offset``.
"""

from pathlib import Path

from conformance.loader import load_target

CODE = "coordinate-offset"
PROTOCOL = "rope2d.apply"

correct = load_target(f"{Path(__file__).resolve().parents[1] / 'rope_vit.py'}:apply")


def apply(x, coords, spec):
    return correct(x, coords + 1, spec)  # BUG: counted from 1
