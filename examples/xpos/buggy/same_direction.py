"""Bug: the key is scaled by zeta^(+(n - c)/B), like the query, instead of by the inverse: the logit
factor becomes zeta^((m + n - 2c)/B), which depends on the absolute positions.

Adapter: apply (xpos.apply). Expected diagnosis: ``scale-direction``.
"""

from pathlib import Path

from conformance.loader import load_target

CODE = "scale-direction"
PROTOCOL = "xpos.apply"

_base = Path(__file__).resolve().parents[1] / "torchscale_style.py"
scaled_rotation = load_target(f"{_base}:scaled_rotation")
centre_of = load_target(f"{_base}:centre_of")


def apply(q, k, positions, spec):
    c = centre_of(positions)
    return scaled_rotation(q, positions, spec, 1, c), scaled_rotation(k, positions, spec, 1, c)  # BUG: +1
