"""Bug: psi(x) = log(|c x|) instead of log(|c x| + 1): -inf at distance 0, and a feature that is
negative for |c x| < 1.

Adapter: bias (fire.bias). Expected diagnosis: ``fire-plus-one-missing``.
"""

from pathlib import Path

import torch

from conformance.loader import load_target

CODE = "fire-plus-one-missing"
PROTOCOL = "fire.bias"

load = load_target(f"{Path(__file__).resolve().parents[1] / 'fire_style.py'}:load")


def bias(q_positions, k_positions, params, spec):
    m = load(params, spec)
    with torch.no_grad():
        q, k = q_positions.to(m.c.dtype), k_positions.to(m.c.dtype)
        threshold = torch.abs(m.L_multiplier * m.init_L)
        rel = torch.log(torch.abs(m.c * (q[:, None] - k[None, :])))  # BUG: + 1 missing
        norm = torch.log(torch.abs(m.c * torch.max(q, threshold)[:, None])) + m.eps  # BUG: + 1 missing
        return m.mlp((rel / norm).unsqueeze(-1)).permute(2, 0, 1)
