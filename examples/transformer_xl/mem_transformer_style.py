"""Transformer-XL relative attention scores as ``RelPartialLearnableMultiHeadAttn`` computes them
(kimiyoung/transformer-xl pytorch/mem_transformer.py), written for the protocol without the batch
dimension.

``PositionalEmbedding``: inv_freq = 1 / 10000^(arange(0, d_model, 2) / d_model) and
R = [sin | cos] of pos_seq x inv_freq, in float32 (the module's buffers) and then cast to the
model's dtype; pos_seq = klen - 1 .. 0, clamped at clamp_len. AC = (q + r_w_bias) . k,
BD = (q + r_r_bias) . r_net(R) lined up by ``_rel_shift``, (AC + BD) * scale, and the mask
fills the entries j > i + mlen with -inf (the protocol does not grade them).

Adapter: ``score`` (transformer_xl.score).
"""

import torch
import torch.nn.functional as F


def positional_embedding(pos_seq, d_model):
    inv_freq = 1 / (10000 ** (torch.arange(0.0, d_model, 2.0) / d_model))
    sinusoid_inp = torch.ger(pos_seq, inv_freq)
    return torch.cat([sinusoid_inp.sin(), sinusoid_inp.cos()], dim=-1)


def rel_shift(x):
    """x [qlen, klen, ...]: pad a zero column, view as [klen + 1, qlen, ...], drop the first row."""
    zero_pad = torch.zeros((x.size(0), 1, *x.size()[2:]), device=x.device, dtype=x.dtype)
    x_padded = torch.cat([zero_pad, x], dim=1)
    x_padded = x_padded.view(x.size(1) + 1, x.size(0), *x.size()[2:])
    return x_padded[1:].view_as(x)


def relative_scores(q, k, r_w_bias, r_r_bias, r_head_k, mlen):
    """(AC + BD) * scale with the mask, [qlen, klen, n_head] -> [n_head, qlen, klen]."""
    qlen, klen, d_head = q.size(0), k.size(0), q.size(2)
    ac = torch.einsum("ind,jnd->ijn", q + r_w_bias, k)
    bd = rel_shift(torch.einsum("ind,jnd->ijn", q + r_r_bias, r_head_k))
    attn_score = (ac + bd) * (1 / (d_head**0.5))
    mask = torch.triu(torch.ones(qlen, klen, dtype=torch.bool, device=q.device), diagonal=1 + mlen)
    return attn_score.masked_fill(mask[:, :, None], float("-inf")).permute(2, 0, 1)


def score(q, k, u, v, r_weight, spec):
    klen, n_head, d_head = k.shape
    pos_seq = torch.arange(klen - 1, -1, -1.0)
    if spec.clamp_len > 0:
        pos_seq.clamp_(max=spec.clamp_len)
    pos_emb = positional_embedding(pos_seq, spec.d_model).to(device=q.device, dtype=q.dtype)
    r_head_k = F.linear(pos_emb, r_weight).view(klen, n_head, d_head)
    return relative_scores(q, k, u, v, r_head_k, spec.mlen)
