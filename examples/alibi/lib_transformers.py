"""transformers' BLOOM ALiBi (``build_alibi_tensor``), graded through thin adapters as a user
would write them.

The library computes the slopes in float32 as ``torch.pow(base, k)`` with base = 2^(-8/c) rounded
to float32 (and the extra heads of a non-power-of-two count from 2^(-8/2c) to odd powers), and
the bias as slope * j, j = 0 .. s-1 the key's index from the attention mask's cumulative sum:
the m j form, which differs from -m (i - j) by the per-row constant softmax ignores.

Adapters: ``slopes`` (alibi.slopes: the bias at key 1 is the slope), ``bias`` (alibi.bias: the
table up to the largest key position, read at the case's keys). Needs ``transformers`` (the
``test`` extra); the tests skip without it.
"""

import torch
from transformers.models.bloom.modeling_bloom import build_alibi_tensor

from conformance import Unsupported

# posref survey (docs/compatibility.md): the distribution this module wraps and its rows,
# (protocol, function[, conform options the library's convention needs]).
LIBRARY = "transformers"
SURVEY = [
    ("alibi.slopes", "slopes"),
    ("alibi.bias", "bias"),
]


def slopes(spec):
    mask = torch.ones(1, 2, dtype=torch.long)
    return build_alibi_tensor(mask, spec.num_heads, torch.float32)[:, 0, 1]


def bias(q_positions, k_positions, spec):
    if spec.causal is False:
        raise Unsupported("BLOOM's ALiBi is the causal m j form only")
    if k_positions.numel() and int(k_positions.min()) < 0:
        raise Unsupported("key positions from 0 (the attention mask's cumulative sum)")
    length = int(k_positions.max()) + 1 if k_positions.numel() else 1
    table = build_alibi_tensor(torch.ones(1, length, dtype=torch.long), spec.num_heads, torch.float32)
    row = table[:, 0, k_positions]  # [heads, sk]: m_h * j
    return row[:, None, :].expand(-1, q_positions.numel(), -1)
