"""An attention layer with its own KV cache in plain torch, as a serving loop calls it: the
``attention.decode`` adapter ``decode(weights, spec) -> layer``.

The layer caches the keys BEFORE RoPE (and the values, and the keys' positions) and rotates the
whole cache at every call with the table of the spec's semantics: "recompute" the table of the
current length (the largest position so far + 1: dynamic NTK's base and LongRoPE's factors of
that length, for every key, as a re-prefill would give), "fixed" the table of ``max_model_len``
for the whole run. The frequencies are examples/rope/module_torch.py's (default, dynamic NTK,
LongRoPE; float32 angles); projections, rotate_half and GQA are examples/attention/sdpa_rope.py's;
SDPA with an additive mask (causal over the cache slots, padded keys at the dtype's minimum, as HF
builds it, so that a padded query's row stays finite). Half layout only (else Unsupported).
"""

from pathlib import Path

import torch
import torch.nn.functional as F

from conformance import Unsupported
from conformance.loader import load_target

_HERE = Path(__file__).resolve().parent
_SDPA = {name: load_target(f"{_HERE / 'sdpa_rope.py'}:{name}") for name in ("project", "apply_rope", "repeat_kv")}
_ROTARY = load_target(f"{_HERE.parent / 'rope' / 'module_torch.py'}:RotaryEmbedding")


class DecodeLayer(torch.nn.Module):
    def __init__(self, weights, spec):
        super().__init__()
        if spec.encoding != "rope" or spec.layout != "half":
            raise Unsupported("rotate_half RoPE (half layout) only")
        if spec.semantics not in ("recompute", "fixed"):
            raise Unsupported(f"semantics {spec.semantics!r}")
        self.weights, self.spec = weights, spec
        self.rotary = _ROTARY(spec.head_dim, spec.rotary_dim, spec.base, spec.layout, spec.scaling)
        self.keys = self.values = self.key_positions = None  # [b, hkv, T, d] (keys before RoPE), [b, T]

    def table_length(self) -> int:
        """The length whose table rotates every query and key of this call."""
        if self.spec.semantics == "fixed":
            return self.spec.max_model_len
        return int(self.key_positions.max()) + 1

    def tables(self, positions, seq_len, device):
        """cos, sin [b, s, rotary_dim] (HF's cat(freqs, freqs), attention factor included), float32."""
        inv_freq, factor = self.rotary.frequencies(seq_len)
        freqs = positions[..., None].float() * inv_freq.to(device=device, dtype=torch.float32)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos() * factor, emb.sin() * factor

    def rotate(self, x, positions, seq_len):
        cos, sin = self.tables(positions, seq_len, x.device)
        return _SDPA["apply_rope"](x, cos, sin, self.spec)

    def store(self, k, v, positions):
        """Append the step's keys (before RoPE), values and positions to the cache."""
        if self.keys is None:
            self.keys, self.values, self.key_positions = k, v, positions
        else:
            self.keys = torch.cat((self.keys, k), dim=2)
            self.values = torch.cat((self.values, v), dim=2)
            self.key_positions = torch.cat((self.key_positions, positions), dim=1)

    def cached_keys(self, seq_len):
        """Every cached key rotated with the current table."""
        return self.rotate(self.keys, self.key_positions, seq_len)

    def forward(self, hidden, positions, attention_mask):
        spec = self.spec
        b, s, _ = hidden.shape
        q, k, v = _SDPA["project"](hidden, self.weights, spec)
        past = 0 if self.keys is None else self.keys.shape[2]
        self.store(k, v, positions)
        seq_len = self.table_length()
        q = self.rotate(q, positions, seq_len)
        keys = self.cached_keys(seq_len)
        K = past + s
        allowed = torch.ones(s, K, dtype=torch.bool, device=hidden.device).tril(past)[None, None]
        allowed = allowed & attention_mask[:, None, None, :K]
        mask = torch.zeros(allowed.shape, dtype=q.dtype, device=hidden.device)
        mask = mask.masked_fill(~allowed, torch.finfo(q.dtype).min)
        groups = spec.num_heads // spec.num_kv_heads
        out = F.scaled_dot_product_attention(q, _SDPA["repeat_kv"](keys, groups),
                                             _SDPA["repeat_kv"](self.values, groups), attn_mask=mask)
        return F.linear(out.transpose(1, 2).reshape(b, s, -1), self.weights["wo"])


def decode(weights, spec):
    """attention.decode adapter: the factory."""
    return DecodeLayer(weights, spec)
