"""rotary-embedding-torch's xPos (RotaryEmbedding(use_xpos=True).rotate_queries_and_keys), graded
through a thin adapter as a user would write it.

The library rotates a sequence at positions 0..s-1 (interleaved pairs, zeta from arange(0, d, 2),
centring len // 2) and is constructed with the whole head rotated, base 10000 and gamma 0.4 fixed,
so the adapter raises Unsupported for anything else. Needs ``rotary-embedding-torch`` (the ``test``
extra); the tests skip without it.
"""

import torch
from rotary_embedding_torch import RotaryEmbedding

from conformance import Unsupported

# posref survey (docs/compatibility.md): the distribution this module wraps and its rows,
# (protocol, function[, conform options the library's convention needs]).
LIBRARY = "rotary-embedding-torch"
SURVEY = [
    ("xpos.apply", "apply"),
]


def apply(q, k, positions, spec):
    s = positions.shape[1]
    if spec.layout != "interleaved" or spec.rotary_dim != spec.head_dim or spec.gamma != 0.4:
        raise Unsupported("interleaved, full rotary, gamma 0.4 only")
    if not torch.equal(positions, torch.arange(s).expand_as(positions)):
        raise Unsupported("positions 0..s-1 only")
    rope = RotaryEmbedding(dim=spec.rotary_dim, theta=spec.base, use_xpos=True, xpos_scale_base=spec.scale_base)
    # the library wants [batch, heads, seq, dim]
    qo, ko = rope.rotate_queries_and_keys(q.transpose(1, 2), k.transpose(1, 2))
    return qo.transpose(1, 2), ko.transpose(1, 2)
