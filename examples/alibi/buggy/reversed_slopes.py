"""Bug: the slopes in reverse order (the first head gets the gentlest slope).

Adapter: slopes (alibi.slopes). Expected diagnosis: ``slopes-reversed``.
"""

from pathlib import Path

from conformance.loader import load_target

CODE = "slopes-reversed"
PROTOCOL = "alibi.slopes"

correct = load_target(f"{Path(__file__).resolve().parents[1] / 'fairseq_style.py'}:slopes")


def slopes(spec):
    return correct(spec).flip(0)  # BUG
