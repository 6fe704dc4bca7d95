"""Bug: xPos fixed to the half layout, pairs (j, j + r/2) and rotate_half, whatever spec.layout
says: the NEOX pairing vLLM shipped for GPT-J and llama.cpp for Orion, here with xPos's scales.
The interleaved cases (torchscale's own layout) get the wrong pairs.

Adapter: apply (xpos.apply). Expected diagnosis: ``layout-swapped``.
"""

import dataclasses
from pathlib import Path

from conformance.loader import load_target

CODE = "layout-swapped"
PROTOCOL = "xpos.apply"

_base = Path(__file__).resolve().parents[1] / "torchscale_style.py"
correct = load_target(f"{_base}:apply")


def apply(q, k, positions, spec):
    return correct(q, k, positions, dataclasses.replace(spec, layout="half"))  # BUG: spec.layout ignored
