"""Bug: gamma 0.5 instead of the case's 0.4 in zeta_i = (2i + gamma r) / ((1 + gamma) r).

Adapter: apply (xpos.apply). Expected diagnosis: ``scale-parameters`` ("gamma 0.5 used instead of 0.4").
"""

from pathlib import Path

from conformance.loader import load_target

CODE = "scale-parameters"
PROTOCOL = "xpos.apply"

_base = Path(__file__).resolve().parents[1] / "torchscale_style.py"
scaled_rotation = load_target(f"{_base}:scaled_rotation")
centre_of = load_target(f"{_base}:centre_of")


def apply(q, k, positions, spec):
    c = centre_of(positions)
    return (scaled_rotation(q, positions, spec, 1, c, gamma=0.5),  # BUG: gamma
            scaled_rotation(k, positions, spec, -1, c, gamma=0.5))
