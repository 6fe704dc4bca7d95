"""Bug: rotates x in place (``x[..., :r] = ...``) and returns x itself.

The returned values are right, but the caller's query/key tensor is overwritten: applying the
embedding twice (or reusing x for a residual) silently goes wrong. Expected diagnosis:
``input-mutated`` ("the input tensor x (N heads, S tokens) was modified in place"), from the black-box "inputs not
mutated" check and the runner's output validation.
"""

import torch

from conformance import Unsupported


# What posref must report for this file, graded as <file>:apply on the rope.apply catalog
# (tests/test_family_contract.py checks it).
CODE = "input-mutated"
PROTOCOL = "rope.apply"


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply(x, positions, spec):
    if spec.layout != "half":
        raise Unsupported("half layout only")
    r = spec.rotary_dim
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2, device=x.device).float() / r))
    freqs = positions[..., None].float() * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)[:, :, None, :]
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    x_rot = x[..., :r]
    x[..., :r] = x_rot * cos + rotate_half(x_rot) * sin  # BUG: writes into the caller's tensor
    return x
