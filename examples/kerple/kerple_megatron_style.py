"""KERPLE as the authors' Megatron code computes it (``ParallelKerpleLog`` /
``ParallelKerplePower``), written for the protocol.

The per-head parameters live in float32 tensors of shape [heads, 1, 1] and are clamped on every
forward pass (log: both >= 1e-2; power: r1 >= 1e-2, r2 in [1e-2, 2]); the bias is
-r1 * log(1 + r2 * diff) or -r1 * diff ** r2 with diff = |i - j| as a float tensor, exactly the
code's arithmetic (``torch.log(1 + ...)``, not log1p).

Adapter: ``bias`` (kerple.bias).
"""

import torch

EPS = 1e-2


def parameters(spec):
    """(r1, r2) as float32 [heads, 1, 1] tensors, clamped as the forward pass clamps them."""
    r1 = torch.tensor(spec.r1, dtype=torch.float32)[:, None, None].clamp(min=EPS)
    r2 = torch.tensor(spec.r2, dtype=torch.float32)[:, None, None]
    r2 = r2.clamp(min=EPS) if spec.variant == "log" else r2.clamp(min=EPS, max=2)
    return r1, r2


def distance(q_positions, k_positions):
    return (q_positions[:, None] - k_positions[None, :]).abs().float()[None]


def kerple_log(diff, r1, r2):
    return -r1 * torch.log(1 + r2 * diff)


def kerple_power(diff, r1, r2):
    return -r1 * diff.pow(r2)


def bias(q_positions, k_positions, spec):
    r1, r2 = parameters(spec)
    diff = distance(q_positions, k_positions)
    return kerple_log(diff, r1, r2) if spec.variant == "log" else kerple_power(diff, r1, r2)
