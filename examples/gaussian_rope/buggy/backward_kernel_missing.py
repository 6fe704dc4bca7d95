"""Bug: the kernel K(m) is applied in the forward but left out of the hand-written backward, which
rotates the cotangent back with the right table and stops there: the gradient is R_{-m} g instead
of K(m) R_{-m} g, 1 / K(m) times too large (right at m = 0, where the seed's kernel is 1; 1.4
times at m = 5 and 1.9e9 at m = 127, where the kernel has decayed).

The forward is examples/gaussian_rope/autograd_function.py's. Expected diagnosis under --grad:
``backward-scale`` ("the kernel K(m) is missing from the backward").
"""

from pathlib import Path

import torch

from conformance.loader import load_target

# What posref must report for this file, graded as <file>:apply on the gaussian_rope.apply catalog
# with --grad (tests/test_family_contract.py checks it).
CODE = "backward-scale"
PROTOCOL = "gaussian_rope.apply"
OPTIONS = {"grad": True, "cases": "gaussian_rope.apply/document-half/*", "fresh": False}

_here = Path(__file__).resolve().parents[1] / "autograd_function.py"
_tables = load_target(f"{_here}:tables")
_kernel = load_target(f"{_here}:kernel")
_turn = load_target(f"{_here}:turn")


class KernelForgotten(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, cos, sin, amp, rotary_dim, layout):
        ctx.save_for_backward(cos, sin)
        ctx.rotary_dim, ctx.layout = rotary_dim, layout
        return _turn(x, cos, sin, amp, rotary_dim, layout)

    @staticmethod
    def backward(ctx, grad):
        cos, sin = ctx.saved_tensors
        one = torch.ones((), dtype=grad.dtype, device=grad.device)
        # BUG: K(m) is not applied to the gradient (it needs K(m) R_{-m} g).
        return _turn(grad, cos, -sin, one, ctx.rotary_dim, ctx.layout), None, None, None, None, None


def apply(x, positions, spec):
    cos, sin = _tables(positions, spec, x.dtype)
    amp = _kernel(positions, spec.kernel)[:, :, None, None].to(x.dtype)
    return KernelForgotten.apply(x, cos, sin, amp, spec.rotary_dim, spec.layout)
