"""Bug: the parameters used as the checkpoint holds them, without the forward pass's clamps
(log: r1, r2 >= 1e-2; power: r1 >= 1e-2, r2 in [1e-2, 2]).

Adapter: bias (kerple.bias). Expected diagnosis: ``kerple-clamp-missing``.
"""

from pathlib import Path

import torch

from conformance.loader import load_target

CODE = "kerple-clamp-missing"
PROTOCOL = "kerple.bias"

_STYLE = Path(__file__).resolve().parents[1] / "kerple_megatron_style.py"
distance = load_target(f"{_STYLE}:distance")
kerple_log = load_target(f"{_STYLE}:kerple_log")
kerple_power = load_target(f"{_STYLE}:kerple_power")


def bias(q_positions, k_positions, spec):
    r1 = torch.tensor(spec.r1, dtype=torch.float32)[:, None, None]  # BUG: no clamp
    r2 = torch.tensor(spec.r2, dtype=torch.float32)[:, None, None]
    diff = distance(q_positions, k_positions)
    return kerple_log(diff, r1, r2) if spec.variant == "log" else kerple_power(diff, r1, r2)
