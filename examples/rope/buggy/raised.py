"""Bug: a cos/sin cache precomputed for max_position_embeddings = 4096 positions and indexed by
position, so any position >= 4096 raises IndexError (no cache extension).

Expected diagnosis: ``raised`` ("IndexError: ...") for long-context cases, from the runner (and
for the black-box checks whose inputs hold positions past 4096).
"""

import torch

from conformance import Unsupported


# What posref must report for this file, graded as <file>:apply on the rope.apply catalog
# (tests/test_family_contract.py checks it).
CODE = "raised"
PROTOCOL = "rope.apply"

MAX_POSITION_EMBEDDINGS = 4096


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def _cache(spec, device):
    r = spec.rotary_dim
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2, device=device).float() / r))
    t = torch.arange(MAX_POSITION_EMBEDDINGS, device=device).float()
    emb = torch.cat((torch.outer(t, inv_freq),) * 2, dim=-1)
    return emb.cos(), emb.sin()


def apply(x, positions, spec):
    if spec.layout != "half":
        raise Unsupported("half layout only")
    r = spec.rotary_dim
    cos_cached, sin_cached = _cache(spec, x.device)
    if int(positions.max()) >= MAX_POSITION_EMBEDDINGS or int(positions.min()) < 0:
        # What advanced indexing would raise on a GPU as a device-side assert, said plainly.
        raise IndexError(f"position {int(positions.max())} is out of the cos/sin cache "
                         f"(max_position_embeddings={MAX_POSITION_EMBEDDINGS})")
    cos = cos_cached[positions][:, :, None, :].to(x.dtype)  # BUG: no extension past the cache
    sin = sin_cached[positions][:, :, None, :].to(x.dtype)
    x_rot = x[..., :r]
    return torch.cat((x_rot * cos + rotate_half(x_rot) * sin, x[..., r:]), dim=-1)
