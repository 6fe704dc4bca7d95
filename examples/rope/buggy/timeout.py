"""Bug: stands for a kernel that deadlocks (a spin-wait on a lock that is never released) for
positions at or past 2^16: it sleeps forever.

Grade it with ``--timeout SECONDS`` (and preferably ``--isolate``, which kills the hung child;
in-process, the hung call stays asleep in a daemon thread). Expected diagnosis: ``timeout``.
"""

import time

import torch

from conformance import Unsupported


# What posref must report for this file, graded as <file>:apply on the rope.apply catalog
# (tests/test_family_contract.py checks it).
CODE = "timeout"
PROTOCOL = "rope.apply"
OPTIONS = {"timeout": 2.0, "cases": "rope.apply/llama2-d128/*"}

LIMIT = 1 << 16


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply(x, positions, spec):
    if spec.layout != "half":
        raise Unsupported("half layout only")
    while int(positions.max()) >= LIMIT:  # BUG: never returns
        time.sleep(1.0)
    r = spec.rotary_dim
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2, device=x.device).float() / r))
    freqs = positions[..., None].float() * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)[:, :, None, :]
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    x_rot = x[..., :r]
    return torch.cat((x_rot * cos + rotate_half(x_rot) * sin, x[..., r:]), dim=-1)
