"""Bug: pos_seq = klen .. 1 instead of klen - 1 .. 0, so after the relative shift key j meets R at
distance i + mlen - j + 1 (the same as a shift one column off).

Adapter: score (transformer_xl.score). Expected diagnosis: ``xl-shift-off-by-one``.
"""

from pathlib import Path

import torch
import torch.nn.functional as F

from conformance.loader import load_target

CODE = "xl-shift-off-by-one"
PROTOCOL = "transformer_xl.score"

_CORRECT = Path(__file__).resolve().parents[1] / "mem_transformer_style.py"
positional_embedding = load_target(f"{_CORRECT}:positional_embedding")
relative_scores = load_target(f"{_CORRECT}:relative_scores")


def score(q, k, u, v, r_weight, spec):
    klen, n_head, d_head = k.shape
    pos_seq = torch.arange(klen, 0, -1.0)  # BUG: starts at klen
    if spec.clamp_len > 0:
        pos_seq.clamp_(max=spec.clamp_len)
    pos_emb = positional_embedding(pos_seq, spec.d_model).to(device=q.device, dtype=q.dtype)
    r_head_k = F.linear(pos_emb, r_weight).view(klen, n_head, d_head)
    return relative_scores(q, k, u, v, r_head_k, spec.mlen)
