"""Bug: stands for a native extension that corrupts memory on long inputs: for positions at or
past 2^16 it kills the process with ``os.abort()`` (SIGABRT), as an out-of-bounds write in a
fused CUDA/C++ kernel would.

Only meaningful under ``posref conform --isolate``: the child process dies, the case gets
``crashed``, and the run goes on. Without --isolate it takes the whole run down — never call it
in-process. Expected diagnosis: ``crashed``.
"""

import os

import torch

from conformance import Unsupported


# What posref must report for this file, graded as <file>:apply on the rope.apply catalog
# (tests/test_family_contract.py checks it).
CODE = "crashed"
PROTOCOL = "rope.apply"
OPTIONS = {"isolate": True, "cases": "rope.apply/llama2-d128/*"}

LIMIT = 1 << 16


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply(x, positions, spec):
    if spec.layout != "half":
        raise Unsupported("half layout only")
    if int(positions.max()) >= LIMIT:
        os.abort()  # BUG: the "kernel" crashes instead of handling long positions
    r = spec.rotary_dim
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2, device=x.device).float() / r))
    freqs = positions[..., None].float() * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)[:, :, None, :]
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    x_rot = x[..., :r]
    return torch.cat((x_rot * cos + rotate_half(x_rot) * sin, x[..., r:]), dim=-1)
