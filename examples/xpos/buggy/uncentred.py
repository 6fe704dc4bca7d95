"""Bug: the scale exponent is not centred (c = 0): the key's zeta^(-m/B) reaches 3e42 at m = 40000,
past float32's largest value, and the outputs overflow to inf. Any common centring would have
kept them finite and correct.

Adapter: apply (xpos.apply). Expected diagnosis: ``centring-missing``.
"""

from pathlib import Path

from conformance.loader import load_target

CODE = "centring-missing"
PROTOCOL = "xpos.apply"

scaled_rotation = load_target(f"{Path(__file__).resolve().parents[1] / 'torchscale_style.py'}:scaled_rotation")


def apply(q, k, positions, spec):
    return scaled_rotation(q, positions, spec, 1, 0.0), scaled_rotation(k, positions, spec, -1, 0.0)  # BUG: c = 0
