"""Lightning AI's litgpt RoPE, graded through a thin adapter as a user would write it: the cos/sin
tables of ``litgpt.model.GPT.rope_cache`` (which reads ``Config.rope_adjustments`` and calls
``build_rope_cache``) and the rotation of ``CausalSelfAttention``: ``apply_rope`` (rotate_half:
the half layout) or ``apply_rope_interleave`` (``Config.rope_interleave``) on the first
``rope_n_elem`` features, the tail concatenated unchanged.

Scalings, as litgpt.model reads ``rope_adjustments`` (HF ``rope_parameters`` keys mapped to
litgpt's): linear (``factor``), llama3 (``factor``, ``low_freq_factor``, ``high_freq_factor``,
``original_max_seq_len``) and YaRN (``factor``, ``beta_fast``, ``beta_slow``,
``original_max_seq_len``, optional ``mscale``, ``mscale_all_dim``). litgpt cannot express an
explicit YaRN ``attention_factor``, ``truncate=False`` or any other rope_type: Unsupported.

Known fault (posref found it, issue 23): litgpt's YaRN (0.5.13) blends with the ramp reversed
relative to the YaRN paper and transformers (ramp 0, the fast pairs, takes the *interpolated*
frequency), and without ``mscale`` it leaves the attention factor at 1 (HF: 0.1 ln(factor) + 1).
Its YaRN cases fail; the default, linear and llama3 cases pass (tests/rope/test_real_libraries.py).

``apply_rope_interleave`` returns the rotated pairs de-interleaved (features (2i, 2i+1) rotated
and stored at (i, i + r/2), as HF's ``apply_rotary_pos_emb_interleave``): q . k is unchanged
because q and k are permuted alike, so litgpt's attention is right. The adapter puts the pairs
back in place so that the rotation itself is graded against the interleaved layout.

Tables: ``GPT.rope_cache`` tabulates positions 0 .. max_seq_length - 1 in float32, once per model
(again when ``max_seq_length`` grows); the adapter keeps the tables of the last few
configurations, built for max position + 1 rows (again when a case needs more), and reads the
rows with ``batched_index_select``, as ``GPT.forward`` does with ``input_pos``. Positions of
2^17 and beyond (tables of gigabytes) raise Unsupported. Tensor layouts: litgpt rotates q
[B, n_head, T, head_size] (``bhsd``); the adapter transposes ``bshd`` and puts a ``thd`` batch in
one row. The model itself is never built: ``GPT.rope_cache`` only reads its config and length.

Needs ``litgpt`` (and lightning, which its package imports). Its metadata pins
``huggingface-hub<1.4``, which transformers 5 refuses; it imports and runs with hub 2.x, so the
test environment installs it with ``pip install --no-deps litgpt`` plus ``lightning`` and
``jsonargparse[signatures]``. The tests skip without it.
"""

from types import SimpleNamespace

import torch
from litgpt.config import Config
from litgpt.model import GPT, apply_rope, apply_rope_interleave, batched_index_select

from conformance import Unsupported

# posref survey (docs/compatibility.md): the distribution this module wraps and its rows,
# (protocol, function[, conform options the library's convention needs]).
LIBRARY = "litgpt"
SURVEY = [
    ("rope.apply", "apply"),
    ("rope.cache", "cache"),
]
SURVEY_NOTES = {
    "apply": "A real bug posref found (issue 23): litgpt's YaRN blends the frequencies with the ramp "
             "reversed relative to the YaRN paper and transformers (at base 150000 and factor 32 pair 0 "
             "turns by 0.03125 per position instead of 1) and, without mscale, leaves the attention "
             "factor at 1 (transformers: 0.1 ln(factor) + 1): its YaRN cases fail, the unscaled, linear "
             "and llama3 cases pass.",
    "cache": "litgpt's YaRN tables: the ramp reversed and the attention factor left at 1, as for "
             "rope.apply (issue 23); the other scalings' tables pass.",
}

MAX_POSITIONS = 2**17  # the longest table built


def _adjustments(spec):
    """Config.rope_adjustments for spec.scaling (HF keys -> litgpt's), or Unsupported."""
    params = dict(spec.scaling or {})
    rope_type = params.get("rope_type") or params.get("type") or "default"
    if rope_type == "default":
        return None
    if rope_type == "linear":
        return {"factor": params["factor"]}
    if rope_type == "llama3":
        return {"factor": params["factor"], "low_freq_factor": params["low_freq_factor"],
                "high_freq_factor": params["high_freq_factor"],
                "original_max_seq_len": params["original_max_position_embeddings"]}
    if rope_type == "yarn":
        if "attention_factor" in params:
            raise Unsupported("litgpt's YaRN takes no explicit attention_factor (only mscale, mscale_all_dim)")
        if not params.get("truncate", True):
            raise Unsupported("litgpt's GPT.rope_cache always truncates YaRN's correction range")
        out = {"factor": params["factor"], "beta_fast": params.get("beta_fast", 32),
               "beta_slow": params.get("beta_slow", 1),
               "original_max_seq_len": params["original_max_position_embeddings"]}
        out.update({k: params[k] for k in ("mscale", "mscale_all_dim") if k in params})
        return out
    raise Unsupported(f"litgpt implements no {rope_type!r} RoPE scaling")


def _tables(positions, spec):
    """(cos, sin), each [b, s, rotary_dim] in litgpt's form (cat(freqs, freqs)), at the positions."""
    length = int(positions.max()) + 1 if positions.numel() else 1
    if length > MAX_POSITIONS:
        raise Unsupported(f"litgpt tabulates cos/sin up to max_seq_length; positions past {MAX_POSITIONS - 1} "
                          "are not built here")
    adjustments = _adjustments(spec)
    key = (spec.head_dim, spec.rotary_dim, spec.base, repr(adjustments), str(positions.device))
    cos, sin = _TABLES.pop(key, (None, None))
    if cos is None or cos.shape[0] < length:
        config = Config(n_layer=1, n_head=1, n_embd=spec.head_dim, head_size=spec.head_dim, block_size=length,
                        rotary_percentage=spec.rotary_dim / spec.head_dim, rope_base=spec.base,
                        rope_adjustments=adjustments)
        if config.rope_n_elem != spec.rotary_dim:
            raise Unsupported(f"rotary_percentage {config.rotary_percentage} gives rope_n_elem "
                              f"{config.rope_n_elem}, not {spec.rotary_dim}")
        cos, sin = GPT.rope_cache(SimpleNamespace(config=config, max_seq_length=length), device=positions.device)
    _TABLES[key] = cos, sin
    while len(_TABLES) > 4:
        _TABLES.pop(next(iter(_TABLES)))
    return batched_index_select(cos, 0, positions), batched_index_select(sin, 0, positions)


_TABLES = {}  # configuration -> (cos, sin) of GPT.rope_cache, most recent last


def _rotate(q, cos, sin, spec):
    """CausalSelfAttention's rotation of q [B, n_head, T, head_size]."""
    n = spec.rotary_dim
    if spec.layout == "interleaved":
        roped = apply_rope_interleave(q[..., :n], cos, sin)
        # litgpt leaves pair i at (i, i + n/2); put it back at (2i, 2i+1).
        roped = roped.unflatten(-1, (2, n // 2)).transpose(-1, -2).flatten(-2)
    elif spec.layout == "half":
        roped = apply_rope(q[..., :n], cos, sin)
    else:
        raise Unsupported(f"unknown layout {spec.layout!r}")
    return torch.cat((roped, q[..., n:]), dim=-1)


def apply(x, positions, spec):
    """rope.apply: x in spec.tensor_layout, positions [b, s] (or [t] for thd)."""
    layout = getattr(spec, "tensor_layout", "bshd")
    if layout == "thd":
        x, positions = x[None], positions[None]
    q = x if layout == "bhsd" else x.transpose(1, 2)
    cos, sin = _tables(positions, spec)
    out = _rotate(q, cos, sin, spec)
    out = out if layout == "bhsd" else out.transpose(1, 2)
    return out[0] if layout == "thd" else out


def cache(positions, spec):
    """rope.cache: the first half of litgpt's tables (the pair-order cos and sin), any layout."""
    cos, sin = _tables(positions, spec)
    half = spec.rotary_dim // 2
    return cos[..., :half], sin[..., :half]
