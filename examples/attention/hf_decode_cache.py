"""transformers' LlamaAttention with its own DynamicCache, driven as a serving loop drives it: the
``attention.decode`` adapter ``decode(weights, spec) -> layer``.

The layer holds a ``LlamaAttention`` (eager attention) with the given weights in q_proj ... o_proj,
a ``LlamaRotaryEmbedding`` (examples/rope/module_transformers.py's: the case's scaling in
``rope_parameters``, stateful as HF's is) and a ``DynamicCache``. Each call computes
``position_embeddings`` for the step's positions, builds HF's additive 4-D mask (causal over the
cache slots, padded keys at the dtype's minimum) and calls the attention with
the cache: the cache keeps the keys after RoPE, as HF's does.

``decode`` is the layer as transformers gives it. ``decode_reprefill`` adds what Phi-3's
``prepare_inputs_for_generation`` does for LongRoPE: when the length first passes
``original_max_position_embeddings`` the cache is dropped and the whole history prefilled again
(the layer keeps its inputs for that).

Findings (transformers 5.x; tests/attention/test_attention_decode.py asserts them): default RoPE
passes. Under the ``recompute`` semantics, dynamic NTK fails with ``cache-stale-base`` from the
first step past the original length (HF #25104: ``dynamic_rope_update`` changes the base of the
new queries and keys, the cached keys keep theirs), with or without the re-prefill (the base
changes at every step past the crossing); LongRoPE fails with ``cache-table-mismatch`` at the
crossing, and passes with ``decode_reprefill``. HF has no fixed-table mode: ``fixed`` cases with a
length-dependent scaling raise Unsupported (skipped).
"""

import inspect
from pathlib import Path

import torch

from conformance import Unsupported
from conformance.loader import load_target

# posref survey (docs/compatibility.md): the distribution this module wraps and its rows,
# (protocol, function[, conform options the library's convention needs]).
LIBRARY = "transformers"
SURVEY = [
    ("attention.decode", "decode"),
    ("attention.decode", "decode_reprefill"),
]
SURVEY_NOTES = {
    "decode": "A real fault (HF #25104): under dynamic NTK the new queries and keys get a new base past "
              "the original length while the DynamicCache keeps the keys rotated with the old one "
              "(cache-stale-base); LongRoPE switches tables at the crossing without re-prefilling "
              "(cache-table-mismatch). Default RoPE passes.",
    "decode_reprefill": "Re-prefilling at the crossing, as Phi-3's generation does, fixes LongRoPE; "
                        "dynamic NTK still fails with cache-stale-base (HF #25104): its base changes "
                        "at every step past the original length.",
}

_ROTARY = load_target(f"{Path(__file__).resolve().parents[1] / 'rope' / 'module_transformers.py'}:module")
LENGTH_DEPENDENT = ("dynamic", "longrope")


def _attention(weights, spec, d_model):
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaAttention

    config = LlamaConfig(hidden_size=d_model, num_attention_heads=spec.num_heads,
                         num_key_value_heads=spec.num_kv_heads, head_dim=spec.head_dim, attention_bias=False)
    config._attn_implementation = "eager"
    wq = weights["wq"]
    layer = LlamaAttention(config, layer_idx=0).to(device=wq.device, dtype=wq.dtype).eval()
    with torch.no_grad():
        for name in ("q", "k", "v", "o"):
            getattr(layer, f"{name}_proj").weight.copy_(weights[f"w{name}"])
    return config, layer


class HFDecodeLayer(torch.nn.Module):
    def __init__(self, weights, spec, reprefill=False):
        super().__init__()
        kind = (spec.scaling or {}).get("rope_type", "default")
        if spec.encoding != "rope" or spec.layout != "half" or spec.rotary_dim != spec.head_dim:
            raise Unsupported("LlamaAttention: full rotate_half RoPE only")
        if spec.semantics == "fixed" and kind in LENGTH_DEPENDENT:
            raise Unsupported(f"transformers has no fixed-table mode for {kind}: its table follows the current length")
        self.config, self.attn = _attention(weights, spec, weights["wo"].shape[0])
        self.rotary = _ROTARY(spec).to(weights["wq"].device)
        self.reprefill = reprefill and kind == "longrope"
        self.original = (spec.scaling or {}).get("original_max_position_embeddings")
        self.cache, self.seen = self._new_cache(), None

    def _new_cache(self):
        from transformers import DynamicCache

        return DynamicCache(config=self.config)

    def _call(self, hidden, positions, attention_mask):
        past = self.cache.get_seq_length()
        b, s, _ = hidden.shape
        K = past + s
        allowed = torch.ones(s, K, dtype=torch.bool, device=hidden.device).tril(past)[None, None]
        allowed = allowed & attention_mask[:, None, None, :K]
        mask = torch.zeros(allowed.shape, dtype=hidden.dtype, device=hidden.device)
        mask = mask.masked_fill(~allowed, torch.finfo(hidden.dtype).min)
        cos, sin = self.rotary(hidden, positions)
        # transformers 5.24 names the cache argument ``cache`` (``past_key_values`` before, deprecated since)
        name = "cache" if "cache" in inspect.signature(self.attn.forward).parameters else "past_key_values"
        out, _ = self.attn(hidden, position_embeddings=(cos, sin), attention_mask=mask, **{name: self.cache})
        return out

    @torch.no_grad()
    def forward(self, hidden, positions, attention_mask):
        if not self.reprefill:
            return self._call(hidden, positions, attention_mask)
        before = None if self.seen is None else int(self.seen[1].max()) + 1
        self.seen = (hidden, positions) if self.seen is None else \
            (torch.cat((self.seen[0], hidden), dim=1), torch.cat((self.seen[1], positions), dim=1))
        now = int(self.seen[1].max()) + 1
        if before is not None and before <= self.original < now:  # Phi-3: the switch invalidates the cache
            self.cache = self._new_cache()
            return self._call(*self.seen, attention_mask)[:, -hidden.shape[1]:]
        return self._call(hidden, positions, attention_mask)


def decode(weights, spec):
    """attention.decode adapter: LlamaAttention + DynamicCache, as transformers gives them."""
    return HFDecodeLayer(weights, spec)


def decode_reprefill(weights, spec):
    """The same, re-prefilling at the LongRoPE switch as Phi-3's generate does."""
    return HFDecodeLayer(weights, spec, reprefill=True)
