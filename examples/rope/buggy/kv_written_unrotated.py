"""Bug: the keys are written into the paged cache before RoPE.

The layer appends k and v to the cache first and rotates q and k afterwards (an ordering that is
right only for caches that store unrotated keys and rotate at attention time), so the cache holds k
as it came in. q comes back right. Expected diagnosis: ``kv-written-unrotated``.
"""

import torch

from conformance import Unsupported

CODE = "kv-written-unrotated"
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


def _write(cache, rows, slot_mapping):
    real = slot_mapping >= 0
    cache.view(-1, *cache.shape[-2:]).index_copy_(0, slot_mapping[real], rows[real])


def kv_write(q, k, v, positions, k_cache, v_cache, slot_mapping, spec):
    _write(k_cache, k, slot_mapping)  # BUG: written before the rotation below
    _write(v_cache, v, slot_mapping)
    k = _rotate(k, positions, spec)
    return _rotate(q, positions, spec)
