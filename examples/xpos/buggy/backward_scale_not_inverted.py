"""Bug: a fused xPos kernel saves the query's scaled table zeta^((m - c)/B) cos, sin once and reuses
it in the backward of both outputs; the key's forward used the inverse scale, so the key's gradient
is zeta^((m - c)/B) R_{-m} g_k instead of zeta^(-(m - c)/B) R_{-m} g_k. The query's gradient and
both forward outputs are right.

Expected diagnosis under --grad: ``backward-scale`` ("the key's gradient is scaled by
zeta^((m - c)/B), the query's scale, instead of its inverse").
"""

from pathlib import Path

import torch

from conformance.loader import load_target

# What posref must report for this file, graded as <file>:apply on the xpos.apply catalog with
# --grad (tests/test_family_contract.py checks it).
CODE = "backward-scale"
PROTOCOL = "xpos.apply"
OPTIONS = {"grad": True, "cases": "xpos.apply/torchscale-d64/*", "fresh": False}

_here = Path(__file__).resolve().parents[1] / "autograd_function.py"
_tables = load_target(f"{_here}:scaled_tables")
_turn = load_target(f"{_here}:turn")
_centre_of = load_target(f"{_here}:centre_of")


class FusedXpos(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, q_cos, q_sin, k_cos, k_sin, rotary_dim, layout):
        ctx.save_for_backward(q_cos, q_sin)
        ctx.rotary_dim, ctx.layout = rotary_dim, layout
        return _turn(q, q_cos, q_sin, rotary_dim, layout), _turn(k, k_cos, k_sin, rotary_dim, layout)

    @staticmethod
    def backward(ctx, g_q, g_k):
        cos, sin = ctx.saved_tensors
        r, layout = ctx.rotary_dim, ctx.layout
        # BUG: the key's backward reuses the query's table: its scale is not inverted.
        return (_turn(g_q, cos, -sin, r, layout), _turn(g_k, cos, -sin, r, layout),
                None, None, None, None, None, None)


def apply(q, k, positions, spec):
    c = _centre_of(positions)
    q_cos, q_sin = _tables(positions, spec, 1, c, q.dtype)
    k_cos, k_sin = _tables(positions, spec, -1, c, k.dtype)
    return FusedXpos.apply(q, k, q_cos, q_sin, k_cos, k_sin, spec.rotary_dim, spec.layout)
