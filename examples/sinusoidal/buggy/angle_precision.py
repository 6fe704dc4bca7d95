"""Bug: the angles computed in bfloat16 (positions and frequencies cast to the model dtype first).

Code that builds the table in the model's dtype, ``positions.to(bf16) * inv_freq.to(bf16)``, keeps
8 significant bits of each angle: already position 300 is off by a whole radian in the fastest
frequency. Expected diagnosis: ``angle-precision`` ("angles p * w_i computed in bfloat16").
"""

from pathlib import Path

import torch

from conformance.loader import load_target

# The correct float32 implementation next door, with its angles computed in bfloat16 below.
correct = load_target(f"{Path(__file__).resolve().parents[1] / 'vaswani_torch.py'}:table")

CODE = "angle-precision"
PROTOCOL = "sinusoidal.table"


def table(positions, spec):
    return correct(positions, spec, angle_dtype=torch.bfloat16)  # BUG
