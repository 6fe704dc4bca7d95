"""An attention layer with an interleaved-pair RoPE kernel (pairs (2j, 2j+1): Meta's Llama,
GPT-J, llama.cpp's default mode), as llama.cpp runs an HF checkpoint: a rotate_half checkpoint's
q and k projection rows are first reordered per head into interleaved order (the converter's
``permute``, q with hq heads, k with hkv heads), so that the interleaved kernel computes the same
dot products; a checkpoint already in the interleaved layout is used as it is. SDPA, the masks,
GQA and the KV cache as in sdpa_rope.py (the cache's rotated keys reordered like k).

Adapter: ``forward`` (attention.forward): RoPE (default or YaRN), either layout; partial rotary
in the interleaved layout only (a rotate_half checkpoint with a pass-through tail has no
per-head reordering into interleaved pairs): Unsupported.
"""

from dataclasses import replace
from pathlib import Path

import torch

from conformance import Unsupported
from conformance.loader import load_target

_EXAMPLE = Path(__file__).resolve().parent / "sdpa_rope.py"
part = {name: load_target(f"{_EXAMPLE}:{name}") for name in
        ("project", "rope_tables", "with_cache", "allowed_keys", "additive_mask", "output")}


def permute(w, n_head):
    """llama.cpp's converter: each of the n_head heads' rotate_half rows (j, j + d/2) to
    interleaved rows (2j, 2j + 1)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def rope_interleaved(x, cos, sin, r):
    """x [b, h, s, d]: the first r features turn in pairs (2j, 2j+1); cos, sin [b, s, r] as
    rope_tables gives them (the r/2 angles twice)."""
    half = r // 2
    c, s = cos[:, None, :, :half].to(x.dtype), sin[:, None, :, :half].to(x.dtype)
    a, b = x[..., 0:r:2], x[..., 1:r:2]
    rot = torch.stack((a * c - b * s, b * c + a * s), dim=-1).flatten(-2)
    return torch.cat((rot, x[..., r:]), dim=-1)


def convert(weights, spec, permute_k=None):
    """The weights and spec for the interleaved kernel: a rotate_half checkpoint's q and k rows
    reordered per head (``permute_k`` in place of k's permutation, for the buggy example)."""
    if spec.layout == "interleaved":
        return weights, spec
    if spec.rotary_dim != spec.head_dim:
        raise Unsupported("a rotate_half checkpoint with partial rotary has no interleaved reordering")
    d = spec.head_dim
    permute_k = permute_k or (lambda w: permute(w, spec.num_kv_heads))
    weights = dict(weights, wq=permute(weights["wq"], spec.num_heads), wk=permute_k(weights["wk"]))
    if spec.past_keys is not None:  # the cache's rotated keys, rotate_half order -> interleaved
        order = torch.arange(d, device=spec.past_keys.device).reshape(2, d // 2).T.reshape(-1)
        spec = replace(spec, past_keys=spec.past_keys[..., order])
    return weights, spec


def forward(hidden, weights, positions, spec, permute_k=None):
    if spec.encoding != "rope":
        raise Unsupported("an interleaved RoPE kernel: RoPE cases only")
    b, s, _ = hidden.shape
    w, spec = convert(weights, spec, permute_k)
    q, k, v = part["project"](hidden, w, spec)
    cos, sin = part["rope_tables"](positions, spec)
    q, k = rope_interleaved(q, cos, sin, spec.rotary_dim), rope_interleaved(k, cos, sin, spec.rotary_dim)
    k, v, past = part["with_cache"](k, v, spec)
    k_positions = torch.cat((torch.arange(past, device=positions.device).expand(b, past), positions), dim=1)
    mask = part["additive_mask"](part["allowed_keys"](b, s, past, spec, hidden.device), positions, k_positions,
                                 spec, q.dtype, w)
    # q and k are in the same (interleaved) order, v and o_proj untouched: the layer's output
    return part["output"](q, k, v, mask, w, spec)
