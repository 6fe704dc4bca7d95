"""Bug: the normalizer psi(i) instead of psi(max(i, L)): the threshold (progressive interpolation)
is left out, so short sequences are normalized by their own length.

Adapter: bias (fire.bias). Expected diagnosis: ``fire-threshold-missing``.
"""

from pathlib import Path

import torch

from conformance.loader import load_target

CODE = "fire-threshold-missing"
PROTOCOL = "fire.bias"

load = load_target(f"{Path(__file__).resolve().parents[1] / 'fire_style.py'}:load")


def bias(q_positions, k_positions, params, spec):
    m = load(params, spec)
    with torch.no_grad():
        q, k = q_positions.to(m.c.dtype), k_positions.to(m.c.dtype)
        rel = torch.log(torch.abs(m.c * (q[:, None] - k[None, :])) + 1)
        norm = torch.log(torch.abs(m.c * q[:, None]) + 1) + m.eps  # BUG: max(q, L) missing
        return m.mlp((rel / norm).unsqueeze(-1)).permute(2, 0, 1)
