"""Bug: padding tokens (slot -1) written into the cache.

The batch is padded to a fixed size (CUDA graphs) and its padding tokens carry slot -1; the write
``flat[slot_mapping] = rows`` indexes with -1 like Python does, so every padding token lands on the
cache's last slot, which belongs to some other (or no) sequence. Expected diagnosis:
``kv-padding-written``.
"""

import torch

from conformance import Unsupported

CODE = "kv-padding-written"
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
    cache.view(-1, *cache.shape[-2:])[slot_mapping] = rows  # BUG: slot -1 is the last slot, not "skip"


def kv_write(q, k, v, positions, k_cache, v_cache, slot_mapping, spec):
    _write(k_cache, _rotate(k, positions, spec), slot_mapping)
    _write(v_cache, v, slot_mapping)
    return _rotate(q, positions, spec)
