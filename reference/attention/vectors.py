"""Attention golden vectors: protocol ``attention.forward``.

Arrays (inputs first): ``hidden`` [b, s, D]; the weights ``wq`` [hq d, D], ``wk``, ``wv``
[hkv d, D], ``wo`` [D, hq d] (nn.Linear layout, no biases); ``positions`` [b, s] (int64);
``attention_mask`` [b, P + s] (int64 0/1, 1 = a real token; all ones without padding);
``past_keys``, ``past_values`` [b, hkv, P, d] (the KV cache, post-projection and post-RoPE; P = 0
for prefill); the learned bias weights, empty [0] unless the encoding reads them: FIRE's MLP
``fire_c`` [1] (in [2^-10, 1/8)), ``fire_l_multiplier`` [1] (fixed per test), ``fire_w1``
[hidden, 1], ``fire_b1`` [hidden] (in [-1, 1)), ``fire_w2`` [hq, hidden], ``fire_b2`` [hq]
(in [-1/4, 1/4)) (the weights dict's c, L_multiplier, W1, b1, W2, b2), T5's table
``t5_rel_bias`` [num_buckets, hq] (in [-2, 2); the weights dict's rel_bias); ``expected`` [b, s, D].
Seeded floats are exactly representable in bfloat16 and float16 (reference.golden.inputs) and
scaled by powers of two so that the logits stay of order 1:
hidden in [-2, 2), wq, wk, wv in [-1/4, 1/4), wo in [-1/2, 1/2), the cache in [-2, 2).
Parameters: num_heads, num_kv_heads, head_dim, d_model, causal, encoding ("rope", "alibi",
"none", "kerple", "fire", "t5"), base, rotary_dim, layout, scaling (HF rope_parameters or null),
kerple_variant, kerple_r1, kerple_r2 (KERPLE), fire_hidden (FIRE's MLP width), num_buckets,
max_distance (T5), past_len, padding.
Every value is the nearest double to the exact one (reference.attention golden, mpmath at 192
bits), certified as faithfully rounded (softmax and dot products are reductions) against
oracle.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import mpmath
import numpy as np

from reference import attention
from reference.attention import Config, mla_vectors, oracle
from reference.golden.catalog import GroupSpec, TestGroupSpec, TestSpec, VectorProtocol
from reference.golden.inputs import representable_inputs

FORWARD = "attention.forward"
VASWANI = "https://arxiv.org/abs/1706.03762"
GQA = "https://arxiv.org/abs/2305.13245"
HF_LLAMA = "https://github.com/huggingface/transformers/blob/main/src/transformers/models/llama/modeling_llama.py"
SDPA = "https://pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html"
YARN = "https://arxiv.org/abs/2309.00071"
ALIBI = "https://arxiv.org/abs/2108.12409"
KERPLE = "https://arxiv.org/abs/2205.09921"
FIRE = "https://arxiv.org/abs/2310.04418"
T5 = "https://arxiv.org/abs/1910.10683"
LLAMA_CPP_GQA = "https://github.com/ggml-org/llama.cpp/pull/3364"
HF_GGUF_GQA = "https://github.com/huggingface/transformers/pull/31788"
SCALE = {"hidden": 1.0, "wq": 0.125, "wk": 0.125, "wv": 0.125, "wo": 0.25, "past_keys": 1.0, "past_values": 1.0,
         "fire_c": 0.0625, "fire_w1": 0.5, "fire_b1": 0.5, "fire_w2": 0.125, "fire_b2": 0.125, "t5_rel_bias": 1.0}
# Stored role -> key of the weights dict, per encoding with learned bias weights.
BIAS_WEIGHTS = {
    "fire": {"fire_c": "c", "fire_l_multiplier": "L_multiplier", "fire_w1": "W1", "fire_b1": "b1", "fire_w2": "W2",
             "fire_b2": "b2"},
    "t5": {"t5_rel_bias": "rel_bias"},
}
BIAS_ROLES = (*BIAS_WEIGHTS["fire"], *BIAS_WEIGHTS["t5"])
B, D, HQ, HEAD = 2, 32, 4, 8

NOTES = {
    "Causal": {"bugType": "BASIC", "description": "Causal attention: query slot i sees key slots j <= i (the "
               "cache's P slots first); an off-by-one mask lets a query see the next token or hides its own.",
               "links": [VASWANI, SDPA]},
    "Bidirectional": {"bugType": "FUNCTIONALITY", "description": "No causal mask: every real key is visible.",
                      "links": [VASWANI]},
    "GQA": {"bugType": "FUNCTIONALITY", "description": "Grouped-query heads: query head h reads kv head "
            "h // (hq / hkv) (HF repeat_kv); hkv = 1 is multi-query attention.", "links": [GQA, HF_LLAMA]},
    "RoPE": {"bugType": "BASIC", "description": "Rotary encoding of q and k at the token positions before the "
             "dot product (HF rotate_half or interleaved pairs), logits scaled by 1/sqrt(d).",
             "links": [HF_LLAMA]},
    "AttentionFactor": {"bugType": "EDGE_CASE", "description": "YaRN's attention factor multiplies cos and sin, "
                        "so the logits carry its square; applying it again (also as a softmax temperature) "
                        "scales them by its fourth power.", "links": [YARN]},
    "ALiBi": {"bugType": "BASIC", "description": "ALiBi: no rotation, the bias -m_h (p_i - p_j) added to the "
              "scaled logits.", "links": [ALIBI]},
    "KERPLE": {"bugType": "BASIC", "description": "KERPLE: the bias -r1 log(1 + r2 |p_i - p_j|) (log) or "
               "-r1 |p_i - p_j|^r2 (power) added to the scaled logits, after the clamps r1, r2 >= 1e-2 (power: "
               "r2 <= 2); a head's parameters below the clamp act as 1e-2.", "links": [KERPLE]},
    "FIRE": {"bugType": "BASIC", "description": "FIRE: the learned MLP of psi(p_i - p_j) / (psi(max(p_i, L)) + "
             "1e-6), psi(x) = log(|c x| + 1), L = |L_multiplier 512|, added to the scaled logits; its weights are "
             "entries of the weights dict.", "links": [FIRE]},
    "T5": {"bugType": "BASIC", "description": "T5: the learned table rel_bias [num_buckets, heads] read at the "
           "bucket of p_j - p_i (bidirectional buckets when not causal; logarithmic past num_buckets / 2 or / 4) "
           "and added to the scaled logits.", "links": [T5]},
    "Unscaled": {"bugType": "FUNCTIONALITY", "description": "Logit scale 1 (logit_scale in the params), as T5's "
                 "attention computes q . k + bias (its 1/sqrt(d) folded into the initialisation): a port that "
                 "calls SDPA with its default scale 1/sqrt(d) fails here.", "links": [T5, SDPA]},
    "GQAPermutation": {"bugType": "EDGE_CASE", "description": "Grouped-query attention with hq / hkv != hkv (8 "
                       "query heads over 2 kv heads, 32 over 4): a converter that permutes k's projection rows per "
                       "head with a wrong head count (llama.cpp's convert.py used hq / hkv, which equals hkv for "
                       "Llama 2 70B's 64 over 8 but not for TinyLlama's 32 over 4; HF's GGUF loader used hq), "
                       "or kv heads read as h % hkv instead of h // (hq / hkv), fails here.",
                       "links": [LLAMA_CPP_GQA, HF_GGUF_GQA, GQA]},
    "InterleavedFull": {"bugType": "FUNCTIONALITY", "description": "Full-rotary RoPE in the interleaved layout "
                        "(pairs (2j, 2j+1) over the whole head, as Meta's Llama and GPT-J): a kernel hard-wired "
                        "to rotate_half pairs fails here.", "links": [HF_LLAMA]},
    "NoPE": {"bugType": "BASIC", "description": "No position encoding at all.", "links": [VASWANI]},
    "Padding": {"bugType": "EDGE_CASE", "description": "A padding mask: masked keys get no weight; rows of "
                "masked queries are not graded.", "links": [HF_LLAMA, SDPA]},
    "KVCache": {"bugType": "EDGE_CASE", "description": "Decode with a KV cache: the cache's keys (already "
                "rotated) take slots 0..P-1 at positions 0..P-1, the new tokens follow at their positions; "
                "RoPE at positions restarting from 0, or a causal mask not shifted by P, fails here.",
                "links": [HF_LLAMA]},
    "LargePosition": {"bugType": "EDGE_CASE", "description": "Positions in the thousands: float32 angles lose "
                      "digits; prefill attention depends only on relative positions.", "links": [HF_LLAMA]},
    **mla_vectors.NOTES,  # attention.mla's flags: reference/attention/mla_vectors.py
}


@dataclass(frozen=True)
class AttentionTest(TestSpec):
    positions: tuple = ()  # per batch row
    past_len: int = 0
    mask: tuple | None = None  # per batch row, P + s zeros and ones; None: no padding
    l_multiplier: float = 1.0  # FIRE: the stored L_multiplier (L = |L_multiplier 512|)


def _params(encoding="rope", causal=True, hkv=2, scaling=None, layout="half", rotary_dim=HEAD, hq=HQ, head_dim=HEAD,
            **extra) -> dict:
    return {"num_heads": hq, "num_kv_heads": hkv, "head_dim": head_dim, "d_model": D, "causal": causal,
            "encoding": encoding, "base": 10000.0, "rotary_dim": rotary_dim, "layout": layout, "scaling": scaling,
            **extra}


# Grouped-query shapes where the group size hq / hkv differs from hkv (8 over 2: groups of 4; 32 over 4:
# groups of 8), with head_dim 16: a kv-head grouping h % hkv in place of h // (hq / hkv), or a checkpoint
# converter's per-head row permutation run with hq in place of hkv on k (llama.cpp's convert, HF's GGUF
# loader), only shows on such shapes.
GQA_SHAPES = ((8, 2), (32, 4))
GQA_HEAD = 16


def _kerple(variant, r1, r2, causal=True, hkv=2) -> dict:
    return _params("kerple", causal, hkv, kerple_variant=variant, kerple_r1=list(r1), kerple_r2=list(r2))


FIRE_HIDDEN = 8
T5_BUCKETS = {"num_buckets": 32, "max_distance": 128}  # T5's defaults

def _rows(*rows):
    return tuple(tuple(r) for r in rows)


SQ8 = _rows(range(8), range(8))
YARN_SCALING = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16}


def groups() -> list[GroupSpec]:
    from reference.attention import decode_vectors  # attention.decode's scripts (imported late: it imports us)

    return _forward_groups() + decode_vectors.groups()


def _forward_groups() -> list[GroupSpec]:
    T = AttentionTest
    return [
        GroupSpec(FORWARD, "rope-llama-causal", "Llama-style causal attention with RoPE (rotate_half), 4 query "
                  "heads over 2 or 1 kv heads.", (
                      TestGroupSpec(_params(), (
                          T("prefill-8", "Both rows at positions 0..7.", ("RoPE", "Causal", "GQA"), SQ8),
                          T("positions-4090", "Rows at 4090..4097 and 100..107.", ("RoPE", "Causal", "GQA",
                            "LargePosition"), _rows(range(4090, 4098), range(100, 108))),
                          T("left-padding", "Row 1 left-padded by 3 (HF position ids 1,1,1,0..4).",
                            ("RoPE", "Causal", "GQA", "Padding"), _rows(range(8), (1, 1, 1, 0, 1, 2, 3, 4)), 0,
                            _rows([1] * 8, [0, 0, 0, 1, 1, 1, 1, 1])),
                      )),
                      TestGroupSpec(_params(hkv=1), (
                          T("mqa-prefill-6", "Multi-query attention (one kv head), positions 0..5.",
                            ("RoPE", "Causal", "GQA"), _rows(range(6), range(6))),
                      )),
                  )),
        GroupSpec(FORWARD, "rope-interleaved-bidirectional", "Bidirectional attention with interleaved, partial "
                  "(4 of 8) RoPE.", (TestGroupSpec(_params(causal=False, layout="interleaved", rotary_dim=4), (
                      T("prefill-8", "Both rows at positions 0..7.", ("RoPE", "Bidirectional", "GQA"), SQ8),
                  )),)),
        GroupSpec(FORWARD, "rope-yarn-causal", "Causal attention with YaRN RoPE (factor 4 over 16 positions): "
                  "attention factor 0.1 ln 4 + 1 on cos and sin.", (TestGroupSpec(_params(scaling=YARN_SCALING), (
                      T("prefill-8", "Both rows at positions 0..7.", ("RoPE", "Causal", "AttentionFactor"), SQ8),
                      T("positions-60", "Rows at 60..67 and 0..7.", ("RoPE", "Causal", "AttentionFactor"),
                        _rows(range(60, 68), range(8))),
                  )),)),
        GroupSpec(FORWARD, "rope-gqa-groups", "Causal RoPE attention with grouped-query shapes where the group "
                  "size differs from the kv head count (8 over 2, 32 over 4; head_dim 16), in both pair layouts.",
                  tuple(TestGroupSpec(_params(hkv=hkv, hq=hq, head_dim=GQA_HEAD, rotary_dim=GQA_HEAD, layout=layout), (
                      T(f"{hq}-over-{hkv}-prefill-6", f"{hq} query heads over {hkv} kv heads, {layout} pairs, both "
                        "rows at positions 0..5.", ("RoPE", "Causal", "GQA", "GQAPermutation"),
                        _rows(range(6), range(6))),
                      T(f"{hq}-over-{hkv}-decode-2-after-4", f"{hq} query heads over {hkv} kv heads, {layout} pairs, "
                        "two new tokens at 4, 5 after a cache of 4.", ("RoPE", "Causal", "GQA", "GQAPermutation",
                                                                      "KVCache"), _rows((4, 5), (4, 5)), 4),
                  ) if layout == "half" else (
                      T(f"{hq}-over-{hkv}-interleaved-prefill-6", f"{hq} query heads over {hkv} kv heads, "
                        "interleaved pairs over the whole head, rows at positions 0..5 and 200..205.",
                        ("RoPE", "Causal", "GQA", "GQAPermutation", "InterleavedFull"),
                        _rows(range(6), range(200, 206))),
                  )) for hq, hkv in GQA_SHAPES for layout in ("half", "interleaved"))),
        GroupSpec(FORWARD, "rope-interleaved-causal", "Causal attention with full-rotary interleaved RoPE (pairs "
                  "(2j, 2j+1) over all 8 features, Meta's layout), prefill and decode.", (
                      TestGroupSpec(_params(layout="interleaved"), (
                          T("prefill-8", "Rows at positions 0..7 and 1000..1007.", ("RoPE", "Causal", "GQA",
                            "InterleavedFull"), _rows(range(8), range(1000, 1008))),
                          T("decode-2-after-6", "Two new tokens at 6, 7 after a cache of 6.", ("RoPE", "Causal",
                            "KVCache", "InterleavedFull"), _rows((6, 7), (6, 7)), 6),
                      )),)),
        GroupSpec(FORWARD, "alibi-causal", "Causal attention with ALiBi (slopes 2^-2 .. 2^-8).", (
            TestGroupSpec(_params("alibi"), (
                T("prefill-8", "Both rows at positions 0..7.", ("ALiBi", "Causal", "GQA"), SQ8),
                T("decode-cache-5", "Two new tokens at 5, 6 after a cache of 5.", ("ALiBi", "Causal", "KVCache"),
                  _rows((5, 6), (5, 6)), 5),
            )),)),
        GroupSpec(FORWARD, "kerple", "KERPLE biases (log and power; one head's r1 below the clamp, one power "
                  "exponent above 2).", (
            TestGroupSpec(_kerple("log", (1.0, 0.5, 2.0, 0.005), (0.5, 1.0, 0.25, 3.0)), (
                T("log-prefill-8", "Both rows at positions 0..7.", ("KERPLE", "Causal", "GQA"), SQ8),
                T("log-decode-cache-5", "Two new tokens at 5, 6 after a cache of 5.", ("KERPLE", "Causal",
                  "KVCache"), _rows((5, 6), (5, 6)), 5),
            )),
            TestGroupSpec(_kerple("power", (0.5, 1.0, 0.25, 2.0), (0.5, 1.5, 2.5, 0.005), causal=False), (
                T("power-bidirectional-8", "Both rows at positions 0..7, every key visible.",
                  ("KERPLE", "Bidirectional", "GQA"), SQ8),
            )))),
        GroupSpec(FORWARD, "fire-causal", "Causal attention with a FIRE bias (an MLP of width 8, L = 4 inside "
                  "the prefill).", (TestGroupSpec(_params("fire", fire_hidden=FIRE_HIDDEN), (
                      T("prefill-8", "Both rows at positions 0..7, L_multiplier 2^-7 (L = 4).",
                        ("FIRE", "Causal", "GQA"), SQ8, 0, None, 2.0**-7),
                      T("decode-at-300", "Two new tokens at 300, 301 after a cache of 5, L_multiplier 2^-4 "
                        "(L = 32): the normalizer is psi(i).", ("FIRE", "Causal", "KVCache"),
                        _rows((300, 301), (300, 301)), 5, None, 2.0**-4),
                  )),)),
        GroupSpec(FORWARD, "t5", "T5 relative-position buckets (32 buckets, max distance 128) reading a learned "
                  "table.", (
            TestGroupSpec(_params("t5", **T5_BUCKETS), (
                T("causal-prefill-8", "Both rows at positions 0..7 (exact buckets).", ("T5", "Causal", "GQA"), SQ8),
                T("causal-decode-at-40", "Two new tokens at 40, 41 after a cache of 5: distances 35..41 fall in "
                  "the logarithmic buckets.", ("T5", "Causal", "KVCache"), _rows((40, 41), (40, 41)), 5),
            )),
            TestGroupSpec(_params("t5", causal=False, **T5_BUCKETS), (
                T("bidirectional-8", "Both rows at positions 0..7: later keys in the upper half of the buckets.",
                  ("T5", "Bidirectional", "GQA"), SQ8),
            )))),
        GroupSpec(FORWARD, "t5-unscaled", "T5's attention as the model computes it: unscaled scores (logit_scale "
                  "1) plus the bucketed bias, 4 heads (no grouped-query attention in T5).", (
            TestGroupSpec(_params("t5", causal=False, hkv=HQ, logit_scale=1.0, **T5_BUCKETS), (
                T("encoder-8", "Both rows at positions 0..7, bidirectional (T5's encoder).",
                  ("T5", "Bidirectional", "Unscaled"), SQ8),
            )),
            TestGroupSpec(_params("t5", hkv=HQ, logit_scale=1.0, **T5_BUCKETS), (
                T("decoder-decode-at-40", "Two new tokens at 40, 41 after a cache of 5, causal (T5's decoder "
                  "self-attention).", ("T5", "Causal", "Unscaled", "KVCache"), _rows((40, 41), (40, 41)), 5),
            )))),
        GroupSpec(FORWARD, "nope-bidirectional-padding", "Bidirectional attention without encoding, with padding.", (
            TestGroupSpec(_params("none", causal=False), (
                T("right-padding", "Row 1 right-padded by 3.", ("NoPE", "Bidirectional", "Padding"), SQ8, 0,
                  _rows([1] * 8, [1, 1, 1, 1, 1, 0, 0, 0])),
                T("full-7", "No padding, 7 tokens.", ("NoPE", "Bidirectional"), _rows(range(7), range(7))),
            )),)),
        GroupSpec(FORWARD, "rope-decode-cache", "Decode with a KV cache: new tokens at offsets after the cache.", (
            TestGroupSpec(_params(), (
                T("decode-2-after-6", "Two new tokens at 6, 7 after a cache of 6.", ("RoPE", "Causal", "KVCache"),
                  _rows((6, 7), (6, 7)), 6),
                T("decode-1-after-7", "One new token at 7 after a cache of 7.", ("RoPE", "Causal", "KVCache"),
                  _rows((7,), (7,)), 7),
                T("left-padded-cache", "Row 1's cache left-padded by 2: its new tokens are at 4, 5.",
                  ("RoPE", "Causal", "KVCache", "Padding"), _rows((6, 7), (4, 5)), 6,
                  _rows([1] * 8, [0, 0, 1, 1, 1, 1, 1, 1])),
            )),)),
    ] + mla_vectors.groups()  # attention.mla: reference/attention/mla_vectors.py


KERPLE_R = (0.005, 0.0625, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0)  # 0.005 below the clamp, 2.5 and 3 above
                                                                     # power's


def _fresh_extra(draw, kind, causal):
    """(params extra, l_multiplier, start offset) of a drawn bias encoding."""
    if kind == "kerple":
        variant = draw.choice(("log", "power"))
        return (dict(kerple_variant=variant, kerple_r1=[draw.choice(KERPLE_R[:8]) for _ in range(HQ)],
                     kerple_r2=[draw.choice(KERPLE_R) for _ in range(HQ)]), 1.0, draw.integer(0, 64))
    if kind == "fire":  # L from 2 to 510 (an odd multiple of 2^-k times 512): around the drawn positions
        lm = (2 * draw.integer(0, 127) + 1) / 2.0 ** draw.integer(8, 12)
        return dict(fire_hidden=FIRE_HIDDEN), lm, draw.integer(0, 600)
    if kind == "t5":  # bidirectional: distances below 10, clear of the bucket edges 16, 32, 64
        return dict(T5_BUCKETS), 1.0, draw.integer(0, 100) if causal else 0
    return {}, 1.0, draw.integer(0, 4096) if kind in ("rope", "yarn", "gqa", "interleaved") else 0


def fresh_forward(draw) -> list:
    kind = draw.choice(("rope", "yarn", "alibi", "none", "kerple", "fire", "t5", "gqa", "interleaved"))
    causal = draw.choice((True, False))
    hkv = draw.choice((1, 2, 4))
    shape = {}
    if kind == "gqa":  # hq / hkv != hkv, head_dim 16, either pair layout (GQA_SHAPES)
        hq, hkv = draw.choice(GQA_SHAPES)
        shape = dict(hq=hq, head_dim=GQA_HEAD, rotary_dim=GQA_HEAD, layout=draw.choice(("half", "interleaved")))
    elif kind == "interleaved":  # full-rotary interleaved pairs
        shape = dict(layout="interleaved")
    s, P = draw.integer(1, 6), draw.integer(0, 4) if causal else 0
    extra, lm, offset = _fresh_extra(draw, kind, causal)
    start = P + offset
    mask = None
    if draw.choice((False, True)):
        pad = draw.integer(1, max(1, P + s - 1))
        mask = _rows([1] * (P + s), [0] * pad + [1] * (P + s - pad))
    encoding = "rope" if kind in ("yarn", "gqa", "interleaved") else kind
    params = _params(encoding, causal, hkv, YARN_SCALING if kind == "yarn" else None, **shape, **extra)
    return [TestGroupSpec(params, (AttentionTest(
        "drawn", f"Drawn at run time: {kind}, causal={causal}, {params['num_heads']} query heads over {hkv} kv "
        f"heads, {s} tokens at {start} after a cache of {P}, padding={mask is not None}{_describe(extra, lm)}.", (),
        _rows(range(start, start + s), range(start, start + s)), P, mask, lm),))]


def _describe(extra, lm) -> str:
    if "kerple_variant" in extra:
        return f", KERPLE {extra['kerple_variant']} r1={extra['kerple_r1']} r2={extra['kerple_r2']}"
    if "fire_hidden" in extra:
        return f", FIRE L_multiplier {lm}"
    return ""


def build_forward(case_id, params, test):
    positions = np.array(test.positions, dtype=np.int64)
    b, s = positions.shape
    P, hq, hkv = test.past_len, params["num_heads"], params["num_kv_heads"]
    d, dm = params["head_dim"], params["d_model"]
    shapes = {"hidden": (b, s, dm), "wq": (hq * d, dm), "wk": (hkv * d, dm), "wv": (hkv * d, dm),
              "wo": (dm, hq * d), "past_keys": (b, hkv, P, d), "past_values": (b, hkv, P, d)}
    enc = params["encoding"]
    if enc == "fire":
        hidden = params["fire_hidden"]
        shapes.update(fire_c=(1,), fire_w1=(hidden, 1), fire_b1=(hidden,), fire_w2=(hq, hidden), fire_b2=(hq,))
    if enc == "t5":
        shapes["t5_rel_bias"] = (params["num_buckets"], hq)
    arrays = {role: representable_inputs(case_id, shape, role) * SCALE[role] for role, shape in shapes.items()}
    for role in BIAS_ROLES:
        arrays.setdefault(role, np.zeros(0))
    if enc == "fire":  # c > 0 as FIRE initialises it (0.1), at least 2^-10
        arrays["fire_c"] = np.maximum(np.abs(arrays["fire_c"]), 2.0**-10)
        arrays["fire_l_multiplier"] = np.array([test.l_multiplier])
    mask = np.ones((b, P + s), dtype=np.int64) if test.mask is None else np.array(test.mask, dtype=np.int64)
    arrays.update(positions=positions, attention_mask=mask)
    return {"past_len": P, "padding": test.mask is not None}, arrays


def config_of(params):
    return Config(int(params["num_heads"]), int(params["num_kv_heads"]), int(params["head_dim"]),
                  bool(params["causal"]), params["encoding"], float(params.get("base", 10000.0)),
                  int(params.get("rotary_dim") or 0), params.get("layout", "half"), params.get("scaling"),
                  int(params.get("seq_len") or 0), params.get("kerple_variant", "log"),
                  tuple(params.get("kerple_r1", ())), tuple(params.get("kerple_r2", ())),
                  int(params.get("num_buckets", 32)), int(params.get("max_distance", 128)),
                  None if params.get("logit_scale") is None else float(params["logit_scale"]))


def weights_of(params, inputs) -> dict:
    """The weights dict of a case: wq, wk, wv, wo and the encoding's learned bias weights."""
    weights = {n: inputs[n] for n in ("wq", "wk", "wv", "wo")}
    weights.update({key: inputs[role] for role, key in BIAS_WEIGHTS.get(params["encoding"], {}).items()})
    if params["encoding"] == "fire":
        weights.update(c=float(weights["c"][0]), L_multiplier=float(weights["L_multiplier"][0]))
    return weights


def _call(params, inputs):
    weights = weights_of(params, inputs)
    return (inputs["hidden"], weights, inputs["positions"], config_of(params)), dict(
        attention_mask=inputs["attention_mask"].astype(bool), past_keys=inputs["past_keys"],
        past_values=inputs["past_values"])


def compute_forward(params, inputs, backend):
    args, kw = _call(params, inputs)
    return {"expected": attention.forward(*args, **kw, backend=backend, mode="golden")}


def shapes_forward(params, arrays):
    return {"expected": arrays["hidden"].shape}


def exact_forward(params, inputs):
    with mpmath.workprec(240):
        return {"expected": oracle.forward_exact(inputs["hidden"], weights_of(params, inputs), inputs["positions"],
                                                 params,
                                                 inputs["attention_mask"].astype(bool), inputs["past_keys"],
                                                 inputs["past_values"])}


PARAMS_SCHEMA = {
    "type": "object", "additionalProperties": False,
    "required": ["num_heads", "num_kv_heads", "head_dim", "d_model", "causal", "encoding", "past_len", "padding"],
    "properties": {
        "num_heads": {"type": "integer", "minimum": 1}, "num_kv_heads": {"type": "integer", "minimum": 1},
        "head_dim": {"type": "integer", "minimum": 1}, "d_model": {"type": "integer", "minimum": 1},
        "causal": {"type": "boolean"}, "encoding": {"enum": ["rope", "alibi", "none", "kerple", "fire", "t5"]},
        "kerple_variant": {"enum": ["log", "power"]},
        "kerple_r1": {"type": "array", "items": {"type": "number"}},
        "kerple_r2": {"type": "array", "items": {"type": "number"}},
        "fire_hidden": {"type": "integer", "minimum": 1},
        "num_buckets": {"type": "integer", "minimum": 2}, "max_distance": {"type": "integer", "minimum": 2},
        "base": {"type": "number"}, "rotary_dim": {"type": "integer", "minimum": 0},
        "layout": {"enum": ["half", "interleaved"]}, "scaling": {"type": ["object", "null"]},
        "seq_len": {"type": "integer", "minimum": 0}, "logit_scale": {"type": "number", "exclusiveMinimum": 0},
        "past_len": {"type": "integer", "minimum": 0}, "padding": {"type": "boolean"},
    },
}

ROLES = ("hidden", "wq", "wk", "wv", "wo", "positions", "attention_mask", "past_keys", "past_values", *BIAS_ROLES)

PROTOCOLS = {
    FORWARD: VectorProtocol(
        FORWARD, {"hidden": "float64", "wq": "float64", "wk": "float64", "wv": "float64", "wo": "float64",
                  "positions": "int64", "attention_mask": "int64", "past_keys": "float64", "past_values": "float64",
                  **{role: "float64" for role in BIAS_ROLES}, "expected": "float64"},
        ROLES, PARAMS_SCHEMA, build_forward, compute_forward, shapes_forward, exact_forward, rounding="faithful",
        fresh=fresh_forward),
    mla_vectors.MLA: mla_vectors.PROTOCOL,  # DeepSeek's MLA: reference/attention/mla_vectors.py
}


def _register_decode():
    """attention.decode (reference/attention/decode_vectors.py): its protocol and flags."""
    from reference.attention import decode_vectors

    PROTOCOLS[decode_vectors.DECODE] = decode_vectors.PROTOCOL
    NOTES.update(decode_vectors.NOTES)


_register_decode()
