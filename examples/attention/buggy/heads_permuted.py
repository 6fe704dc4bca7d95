"""Bug: llama.cpp's checkpoint conversion for grouped-query attention (convert.py before
ggml-org/llama.cpp PR 3364). llama.cpp rotates interleaved pairs (2j, 2j+1), so the converter
reorders each head's q and k projection rows from HF's rotate_half order (j, j + r/2) with
``permute(w, n_head, n_head_kv)``; that function set ``n_head //= n_head_kv`` for k, so k was
permuted with hq / hkv heads instead of hkv. For Llama 2 70B (64 over 8) hq / hkv = 8 = hkv and
nothing showed; TinyLlama (32 over 4) produced gibberish. Here: interleaved_rope.py (the
converter, an interleaved RoPE kernel, SDPA) with that permute; the rotate_half cases with
hq / hkv != hkv fail (8 over 2, 32 over 4), the others pass.

Adapter: forward (attention.forward). Expected diagnosis: ``attention-heads-permuted``.
"""

from pathlib import Path

from conformance.loader import load_target

CODE = "attention-heads-permuted"
PROTOCOL = "attention.forward"

_EXAMPLE = Path(__file__).resolve().parents[1] / "interleaved_rope.py"
correct = load_target(f"{_EXAMPLE}:forward")


def permute(w, n_head, n_head_kv=None):
    """convert.py's permute as it was (HF rotate_half rows -> interleaved rows, per head)."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head //= n_head_kv  # BUG: k has n_head_kv heads, not n_head // n_head_kv
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def forward(hidden, weights, positions, spec):
    return correct(hidden, weights, positions, spec,
                   permute_k=lambda wk: permute(wk, spec.num_heads, spec.num_kv_heads))
