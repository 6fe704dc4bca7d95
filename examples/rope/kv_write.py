"""RoPE fused with the paged KV-cache write, as a serving engine's attention layer does it each step
(vLLM: ``rotary_embedding`` then ``reshape_and_cache``; FlashInfer: ``apply_rope_with_cos_sin_cache_inplace``
then ``append_paged_kv_cache``), in plain torch.

q [t, heads, d], k and v [t, kv_heads, d] hold the step's packed tokens, positions [t] their positions
in their own sequences. The angles m * theta_i are computed in float32 (as HF and vLLM's cos/sin
cache do), cos and sin cast to the model dtype; pairs follow ``spec.layout`` (half: rotate_half,
interleaved: rotate_every_two) over the first ``spec.rotary_dim`` features. The caches are
[num_blocks, block_size, kv_heads, d]; flattened to [num_blocks * block_size, kv_heads, d], slot s is
row s, so the rotated k and v go in with one ``index_copy_`` each, for the real tokens only
(slot_mapping >= 0: padding tokens, slot -1, are left out). Adapter: ``kv_write`` (rope.kv_write).
"""

import torch

from conformance import Unsupported


def rotate(x, positions, spec):
    """x [t, h, d] rotated at positions [t]: float32 angles, cos/sin in x's dtype."""
    if spec.scaling is not None:
        raise Unsupported("no RoPE scaling in this example")
    r = spec.rotary_dim
    inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2, device=x.device).float() / r))
    freqs = positions[:, None].float() * inv_freq  # [t, r/2]
    cos, sin = freqs.cos().to(x.dtype)[:, None, :], freqs.sin().to(x.dtype)[:, None, :]
    if spec.layout == "half":
        x1, x2 = x[..., : r // 2], x[..., r // 2 : r]
        rotated = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
    else:
        x1, x2 = x[..., 0:r:2], x[..., 1:r:2]
        rotated = torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2)
    return torch.cat((rotated, x[..., r:]), dim=-1)


def write_cache(cache, rows, slot_mapping):
    """rows [t, kv_heads, d] written at their slots of cache [num_blocks, block_size, kv_heads, d]
    (in place); slot -1 (padding) is skipped."""
    real = slot_mapping >= 0
    flat = cache.view(-1, cache.shape[-2], cache.shape[-1])
    flat.index_copy_(0, slot_mapping[real], rows[real])


def kv_write(q, k, v, positions, k_cache, v_cache, slot_mapping, spec):
    q_rot = rotate(q, positions, spec)
    write_cache(k_cache, rotate(k, positions, spec), slot_mapping)
    write_cache(v_cache, v, slot_mapping)
    return q_rot
