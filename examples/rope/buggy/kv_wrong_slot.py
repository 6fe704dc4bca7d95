"""Bug: k and v written at slot = token index, as into a contiguous cache: slot_mapping (and the
block tables behind it) never read.

Code written for a contiguous per-batch cache (``cache[:t] = k``) and moved to a paged cache keeps
writing token i to row i of the flattened cache; with blocks handed out in any order, the rows land
in the wrong blocks. Expected diagnosis: ``kv-wrong-slot``.
"""

import torch

from conformance import Unsupported

CODE = "kv-wrong-slot"
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
    tokens = torch.arange(rows.shape[0])  # BUG: the token's index, not slot_mapping[i]
    cache.view(-1, *cache.shape[-2:]).index_copy_(0, tokens[real], rows[real])


def kv_write(q, k, v, positions, k_cache, v_cache, slot_mapping, spec):
    _write(k_cache, _rotate(k, positions, spec), slot_mapping)
    _write(v_cache, v, slot_mapping)
    return _rotate(q, positions, spec)
