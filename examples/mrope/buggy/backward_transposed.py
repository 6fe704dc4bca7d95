"""Bug: a hand-written M-RoPE ``torch.autograd.Function`` (a fused training kernel's shape) whose
backward turns the gradient with the forward's own rotation R instead of its transpose R^T (the
sine keeps its sign), so every pair at a nonzero stream position is turned 2 p_s(i) theta_i too far.

The forward is Qwen2-VL's / Qwen3-VL's (the angles of examples/mrope/qwen_vl.py, rotate_half), so
posref without --grad passes it. Adapter: apply (mrope.apply). Expected diagnosis with --grad:
``backward-transposed``; the float64 black-box gradcheck fails as well.
"""

from pathlib import Path

import torch

from conformance import Unsupported
from conformance.loader import load_target

CODE = "backward-transposed"
PROTOCOL = "mrope.apply"
OPTIONS = {"grad": True, "fresh": False}

_qwen = Path(__file__).resolve().parents[1] / "qwen_vl.py"
stream_angles = load_target(f"{_qwen}:stream_angles")
select = load_target(f"{_qwen}:select")


def rotate_half(x, cos, sin, r):
    """(a, b) = (x[..., :r/2], x[..., r/2:r]) turned by (cos, sin) [b, s, 1, r/2]; the tail copied."""
    a, b = x[..., : r // 2], x[..., r // 2: r]
    return torch.cat((a * cos - b * sin, a * sin + b * cos, x[..., r:]), dim=-1)


class MropeRotation(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, cos, sin, r):
        ctx.save_for_backward(cos, sin)
        ctx.r = r
        return rotate_half(x, cos, sin, r)

    @staticmethod
    def backward(ctx, grad):
        cos, sin = ctx.saved_tensors
        # BUG: the forward's rotation reused; R^T needs -sin.
        return rotate_half(grad, cos, sin, ctx.r), None, None, None


def apply(x, positions, spec):
    if spec.layout != "half":
        raise Unsupported("rotate_half only, as Qwen2-VL and Qwen3-VL")
    angles = select(stream_angles(positions, spec), spec)[:, :, None, :]
    return MropeRotation.apply(x, angles.cos().to(x.dtype), angles.sin().to(x.dtype), spec.rotary_dim)
