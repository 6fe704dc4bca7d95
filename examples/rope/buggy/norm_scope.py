"""Bug: the QK-norm always per head (Qwen3's Qwen3RMSNorm(head_dim)), also for OLMo 2, whose q_norm and
k_norm normalise the whole projection (num_heads * head_dim) before the split into heads: a port of
OLMo 2 written from Qwen3's attention. Each head reads its slice of the projection's weight.

Adapter: qk_norm (rope.qk_norm). Expected diagnosis: ``norm-scope``.
"""

from pathlib import Path

import torch
from transformers.models.qwen3.modeling_qwen3 import Qwen3RMSNorm

from conformance.loader import load_target

CODE = "norm-scope"
PROTOCOL = "rope.qk_norm"

_rope = load_target(f"{Path(__file__).resolve().parents[1] / 'qk_norm_transformers.py'}:rope")


def _per_head(x, weight, spec):
    norm = Qwen3RMSNorm(spec.head_dim, eps=spec.eps)
    with torch.no_grad():
        norm.weight = torch.nn.Parameter(torch.ones(spec.head_dim, dtype=x.dtype), requires_grad=False)
    return norm(x) * weight.reshape(-1, spec.head_dim)  # [heads, head_dim] (OLMo 2's) or [1, head_dim]


def qk_norm(q, k, positions, q_weight, k_weight, spec):
    return _rope(_per_head(q, q_weight, spec), _per_head(k, k_weight, spec), positions, spec)  # BUG: always per head
