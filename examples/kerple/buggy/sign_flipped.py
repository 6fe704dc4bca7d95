"""Bug: +r1 f(|i - j|) instead of -r1 f(|i - j|): the bias grows with the distance.

Adapter: bias (kerple.bias). Expected diagnosis: ``kerple-sign``.
"""

from pathlib import Path

import torch

from conformance.loader import load_target

CODE = "kerple-sign"
PROTOCOL = "kerple.bias"

_STYLE = Path(__file__).resolve().parents[1] / "kerple_megatron_style.py"
parameters = load_target(f"{_STYLE}:parameters")
distance = load_target(f"{_STYLE}:distance")


def bias(q_positions, k_positions, spec):
    r1, r2 = parameters(spec)
    diff = distance(q_positions, k_positions)
    kernel = torch.log(1 + r2 * diff) if spec.variant == "log" else diff.pow(r2)
    return r1 * kernel  # BUG: the minus sign is missing
