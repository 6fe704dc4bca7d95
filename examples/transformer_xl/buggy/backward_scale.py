"""Bug: a hand-written autograd Function fuses the score's scale and the mask (as fused attention
kernels do), and its backward masks the gradient but forgets the scale: the cotangent reaches AC
and BD unscaled, so every gradient (q, k, u, v, r_weight) is sqrt(d_head) times too large.

The forward is right (mem_transformer.py's AC + BD through ``_rel_shift``), so only --grad sees
it. Adapter: score (transformer_xl.score). Expected diagnosis: ``backward-scale``.
"""

from pathlib import Path

import torch
import torch.nn.functional as F

from conformance.loader import load_target

CODE = "backward-scale"
PROTOCOL = "transformer_xl.score"
OPTIONS = {"grad": True}

_CORRECT = Path(__file__).resolve().parents[1] / "mem_transformer_style.py"
positional_embedding = load_target(f"{_CORRECT}:positional_embedding")
rel_shift = load_target(f"{_CORRECT}:rel_shift")


class ScaleAndMask(torch.autograd.Function):
    @staticmethod
    def forward(ctx, scores, scale, mask):
        ctx.save_for_backward(mask)
        return (scores * scale).masked_fill(mask, float("-inf"))

    @staticmethod
    def backward(ctx, grad):
        (mask,) = ctx.saved_tensors
        return grad.masked_fill(mask, 0.0), None, None  # BUG: the gradient needs grad * scale


def score(q, k, u, v, r_weight, spec):
    klen, n_head, d_head = k.shape
    qlen = q.size(0)
    pos_seq = torch.arange(klen - 1, -1, -1.0)
    if spec.clamp_len > 0:
        pos_seq.clamp_(max=spec.clamp_len)
    pos_emb = positional_embedding(pos_seq, spec.d_model).to(device=q.device, dtype=q.dtype)
    r_head_k = F.linear(pos_emb, r_weight).view(klen, n_head, d_head)
    ac = torch.einsum("ind,jnd->ijn", q + u, k)
    bd = rel_shift(torch.einsum("ind,jnd->ijn", q + v, r_head_k))
    mask = torch.triu(torch.ones(qlen, klen, dtype=torch.bool, device=q.device), diagonal=1 + spec.mlen)
    return ScaleAndMask.apply(ac + bd, 1 / d_head**0.5, mask[:, :, None]).permute(2, 0, 1)
