"""Bug: the normalized distance psi(i - j) / (psi(max(i, L)) + eps) is a hand-written autograd
Function (a fused feature kernel), and its backward returns the gradient of c but None for the
threshold L = |L_multiplier init_L|: L_multiplier never learns. Its gradient, nonzero wherever a
query lies below the threshold (the normalizer psi(L) depends on L there), is missing.

The forward is right (the FIRE module's formula); only --grad sees it. Adapter: bias (fire.bias).
Expected diagnosis: ``backward-missing``.
"""

import torch
from torch import nn

CODE = "backward-missing"
PROTOCOL = "fire.bias"
OPTIONS = {"grad": True}


class NormalizedDistance(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, c, threshold, eps):
        rel = q[:, None] - k[None, :]
        m = torch.max(q, threshold)[:, None]
        a = torch.log(torch.abs(c * rel) + 1)
        d = torch.log(torch.abs(c * m) + 1) + eps
        ctx.save_for_backward(rel, m, c, a, d)
        return a / d

    @staticmethod
    def backward(ctx, grad):
        rel, m, c, a, d = ctx.saved_tensors
        grad_a = grad / d
        grad_d = -(grad * a / (d * d)).sum(dim=1, keepdim=True)
        grad_c = (grad_a * torch.sign(c * rel) * rel / (torch.abs(c * rel) + 1)).sum() \
            + (grad_d * torch.sign(c * m) * m / (torch.abs(c * m) + 1)).sum()
        # BUG: the threshold's gradient (grad_d |c| / (|c m| + 1) on the rows where L > i) is left out.
        return None, None, grad_c.to(c.dtype), None, None


def bias(q_positions, k_positions, params, spec):
    dtype = params["W1"].dtype
    positions_dtype = torch.promote_types(dtype, torch.float32)
    q, k = q_positions.to(positions_dtype), k_positions.to(positions_dtype)
    threshold = torch.abs(params["L_multiplier"] * spec.init_L)
    x = NormalizedDistance.apply(q, k, params["c"], threshold, spec.eps)
    hidden = nn.functional.relu(nn.functional.linear(x.unsqueeze(-1).to(dtype), params["W1"], params["b1"]))
    return nn.functional.linear(hidden, params["W2"], params["b2"]).permute(2, 0, 1)
