"""Bug: the CLS token is rotated with the patches (at the coordinates it was given) instead of
being passed through.

Adapter: apply (rope2d.apply). Expected diagnosis: ``cls-rotated``.
"""

from pathlib import Path

from conformance.loader import load_target

CODE = "cls-rotated"
PROTOCOL = "rope2d.apply"

_base = Path(__file__).resolve().parents[1] / "rope_vit.py"
angles = load_target(f"{_base}:angles")
rotate = load_target(f"{_base}:rotate")


def apply(x, coords, spec):
    return rotate(x, angles(coords, spec), spec, cls_tokens=0)  # BUG: CLS rotated too
