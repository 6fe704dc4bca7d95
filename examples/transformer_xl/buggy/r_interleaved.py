"""Bug: the sinusoid R interleaved, [sin w_0, cos w_0, sin w_1, cos w_1, ...] (the Vaswani layout),
where Transformer-XL's PositionalEmbedding concatenates [sin | cos] and r_net's weights expect it.

Adapter: score (transformer_xl.score). Expected diagnosis: ``xl-r-interleaved``.
"""

from pathlib import Path

import torch
import torch.nn.functional as F

from conformance.loader import load_target

CODE = "xl-r-interleaved"
PROTOCOL = "transformer_xl.score"

relative_scores = load_target(f"{Path(__file__).resolve().parents[1] / 'mem_transformer_style.py'}:relative_scores")


def score(q, k, u, v, r_weight, spec):
    klen, n_head, d_head = k.shape
    pos_seq = torch.arange(klen - 1, -1, -1.0)
    if spec.clamp_len > 0:
        pos_seq.clamp_(max=spec.clamp_len)
    inv_freq = 1 / (10000 ** (torch.arange(0.0, spec.d_model, 2.0) / spec.d_model))
    angles = torch.ger(pos_seq, inv_freq)
    pos_emb = torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(-2)  # BUG: interleaved
    r_head_k = F.linear(pos_emb.to(device=q.device, dtype=q.dtype), r_weight).view(klen, n_head, d_head)
    return relative_scores(q, k, u, v, r_head_k, spec.mlen)
