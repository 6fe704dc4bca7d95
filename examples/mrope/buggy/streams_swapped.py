"""Bug: the h and w streams are swapped (positions read as (t, w, h)).

Adapter: apply (mrope.apply). Expected diagnosis: ``stream-swapped``.
"""

from pathlib import Path

from conformance.loader import load_target

CODE = "stream-swapped"
PROTOCOL = "mrope.apply"

correct = load_target(f"{Path(__file__).resolve().parents[1] / 'qwen_vl.py'}:apply")


def apply(x, positions, spec):
    return correct(x, positions[[0, 2, 1]], spec)  # BUG: (t, w, h)
