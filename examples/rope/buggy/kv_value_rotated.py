"""Bug: v rotated like k before it is written.

A fused kernel that loops over "k and v" with the same body rotates both; the value cache then
holds rotated values (q and the keys are right). Expected diagnosis: ``kv-value-rotated``.
"""

import torch

from conformance import Unsupported

CODE = "kv-value-rotated"
PROTOCOL = "rope.kv_write"


def _rotate(x, positions, spec):
    if spec.layout != "half" or spec.scaling is not None:
        raise Unsupported("half layout, no scaling")
    r = spec.rotary_dim
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2).float() / r))
    freqs = positions[:, None].float() * inv_freq
    cos, sin = freqs.cos().to(x.dtype)[:, None, :], freqs.sin().to(x.dtype)[:, None, :]
    x1, x2 = x[..., : r // 2], x[..., r // 2 : r]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin, x[..., r:]), dim=-1)


def kv_write(q, k, v, positions, k_cache, v_cache, slot_mapping, spec):
    real = slot_mapping >= 0
    for cache, rows in ((k_cache, k), (v_cache, v)):
        rotated = _rotate(rows, positions, spec)  # BUG: v is rotated too
        cache.view(-1, *cache.shape[-2:]).index_copy_(0, slot_mapping[real], rotated[real])
    return _rotate(q, positions, spec)
