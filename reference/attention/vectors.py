"""Attention golden vectors: protocol ``attention.forward``.

Arrays (inputs first): ``hidden`` [b, s, D]; the weights ``wq`` [hq d, D], ``wk``, ``wv``
[hkv d, D], ``wo`` [D, hq d] (nn.Linear layout, no biases); ``positions`` [b, s] (int64);
``attention_mask`` [b, P + s] (int64 0/1, 1 = a real token; all ones without padding);
``past_keys``, ``past_values`` [b, hkv, P, d] (the KV cache, post-projection and post-RoPE; P = 0
for prefill); ``expected`` [b, s, D]. Seeded floats are exactly representable in bfloat16 and
float16 (reference.golden.inputs) and scaled by powers of two so that the logits stay of order 1:
hidden in [-2, 2), wq, wk, wv in [-1/4, 1/4), wo in [-1/2, 1/2), the cache in [-2, 2).
Parameters: num_heads, num_kv_heads, head_dim, d_model, causal, encoding ("rope", "alibi",
"none"), base, rotary_dim, layout, scaling (HF rope_parameters or null), past_len, padding.
Every value is the nearest double to the exact one (reference.attention golden, mpmath at 192
bits), certified as faithfully rounded (softmax and dot products are reductions) against
oracle.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import mpmath
import numpy as np

from reference.golden.catalog import GroupSpec, TestGroupSpec, TestSpec, VectorProtocol
from reference.golden.inputs import representable_inputs

FORWARD = "attention.forward"
VASWANI = "https://arxiv.org/abs/1706.03762"
GQA = "https://arxiv.org/abs/2305.13245"
HF_LLAMA = "https://github.com/huggingface/transformers/blob/main/src/transformers/models/llama/modeling_llama.py"
SDPA = "https://pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html"
YARN = "https://arxiv.org/abs/2309.00071"
ALIBI = "https://arxiv.org/abs/2108.12409"
SCALE = {"hidden": 1.0, "wq": 0.125, "wk": 0.125, "wv": 0.125, "wo": 0.25, "past_keys": 1.0, "past_values": 1.0}
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
    "NoPE": {"bugType": "BASIC", "description": "No position encoding at all.", "links": [VASWANI]},
    "Padding": {"bugType": "EDGE_CASE", "description": "A padding mask: masked keys get no weight; rows of "
                "masked queries are not graded.", "links": [HF_LLAMA, SDPA]},
    "KVCache": {"bugType": "EDGE_CASE", "description": "Decode with a KV cache: the cache's keys (already "
                "rotated) take slots 0..P-1 at positions 0..P-1, the new tokens follow at their positions; "
                "RoPE at positions restarting from 0, or a causal mask not shifted by P, fails here.",
                "links": [HF_LLAMA]},
    "LargePosition": {"bugType": "EDGE_CASE", "description": "Positions in the thousands: float32 angles lose "
                      "digits; prefill attention depends only on relative positions.", "links": [HF_LLAMA]},
}


@dataclass(frozen=True)
class AttentionTest(TestSpec):
    positions: tuple = ()  # per batch row
    past_len: int = 0
    mask: tuple | None = None  # per batch row, P + s zeros and ones; None: no padding


def _params(encoding="rope", causal=True, hkv=2, scaling=None, layout="half", rotary_dim=HEAD) -> dict:
    return {"num_heads": HQ, "num_kv_heads": hkv, "head_dim": HEAD, "d_model": D, "causal": causal,
            "encoding": encoding, "base": 10000.0, "rotary_dim": rotary_dim, "layout": layout, "scaling": scaling}


def _rows(*rows):
    return tuple(tuple(r) for r in rows)


SQ8 = _rows(range(8), range(8))
YARN_SCALING = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16}


def groups() -> list[GroupSpec]:
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
        GroupSpec(FORWARD, "alibi-causal", "Causal attention with ALiBi (slopes 2^-2 .. 2^-8).", (
            TestGroupSpec(_params("alibi"), (
                T("prefill-8", "Both rows at positions 0..7.", ("ALiBi", "Causal", "GQA"), SQ8),
                T("decode-cache-5", "Two new tokens at 5, 6 after a cache of 5.", ("ALiBi", "Causal", "KVCache"),
                  _rows((5, 6), (5, 6)), 5),
            )),)),
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
    ]


def fresh_forward(draw) -> list:
    kind = draw.choice(("rope", "yarn", "alibi", "none"))
    causal = draw.choice((True, False))
    hkv = draw.choice((1, 2, 4))
    s, P = draw.integer(1, 6), draw.integer(0, 4) if causal else 0
    start = P + (draw.integer(0, 4096) if kind in ("rope", "yarn") else 0)
    mask = None
    if draw.choice((False, True)):
        pad = draw.integer(1, max(1, P + s - 1))
        mask = _rows([1] * (P + s), [0] * pad + [1] * (P + s - pad))
    params = _params("rope" if kind == "yarn" else kind, causal, hkv, YARN_SCALING if kind == "yarn" else None)
    return [TestGroupSpec(params, (AttentionTest(
        "drawn", f"Drawn at run time: {kind}, causal={causal}, {hkv} kv heads, {s} tokens at {start} after a "
        f"cache of {P}, padding={mask is not None}.", (), _rows(range(start, start + s), range(start, start + s)),
        P, mask),))]


def build_forward(case_id, params, test):
    positions = np.array(test.positions, dtype=np.int64)
    b, s = positions.shape
    P, hq, hkv = test.past_len, params["num_heads"], params["num_kv_heads"]
    d, dm = params["head_dim"], params["d_model"]
    shapes = {"hidden": (b, s, dm), "wq": (hq * d, dm), "wk": (hkv * d, dm), "wv": (hkv * d, dm),
              "wo": (dm, hq * d), "past_keys": (b, hkv, P, d), "past_values": (b, hkv, P, d)}
    arrays = {role: representable_inputs(case_id, shape, role) * SCALE[role] for role, shape in shapes.items()}
    mask = np.ones((b, P + s), dtype=np.int64) if test.mask is None else np.array(test.mask, dtype=np.int64)
    arrays.update(positions=positions, attention_mask=mask)
    return {"past_len": P, "padding": test.mask is not None}, arrays


def config_of(params):
    from reference.attention import Config

    return Config(int(params["num_heads"]), int(params["num_kv_heads"]), int(params["head_dim"]),
                  bool(params["causal"]), params["encoding"], float(params.get("base", 10000.0)),
                  int(params.get("rotary_dim") or 0), params.get("layout", "half"), params.get("scaling"),
                  int(params.get("seq_len") or 0))


def _call(params, inputs):
    weights = {n: inputs[n] for n in ("wq", "wk", "wv", "wo")}
    return (inputs["hidden"], weights, inputs["positions"], config_of(params)), dict(
        attention_mask=inputs["attention_mask"].astype(bool), past_keys=inputs["past_keys"],
        past_values=inputs["past_values"])


def compute_forward(params, inputs, backend):
    from reference import attention

    args, kw = _call(params, inputs)
    return {"expected": attention.forward(*args, **kw, backend=backend, mode="golden")}


def shapes_forward(params, arrays):
    return {"expected": arrays["hidden"].shape}


def exact_forward(params, inputs):
    from reference.attention import oracle

    with mpmath.workprec(240):
        return {"expected": oracle.forward_exact(inputs["hidden"], inputs, inputs["positions"], params,
                                                 inputs["attention_mask"].astype(bool), inputs["past_keys"],
                                                 inputs["past_values"])}


PARAMS_SCHEMA = {
    "type": "object", "additionalProperties": False,
    "required": ["num_heads", "num_kv_heads", "head_dim", "d_model", "causal", "encoding", "past_len", "padding"],
    "properties": {
        "num_heads": {"type": "integer", "minimum": 1}, "num_kv_heads": {"type": "integer", "minimum": 1},
        "head_dim": {"type": "integer", "minimum": 1}, "d_model": {"type": "integer", "minimum": 1},
        "causal": {"type": "boolean"}, "encoding": {"enum": ["rope", "alibi", "none"]},
        "base": {"type": "number"}, "rotary_dim": {"type": "integer", "minimum": 0},
        "layout": {"enum": ["half", "interleaved"]}, "scaling": {"type": ["object", "null"]},
        "seq_len": {"type": "integer", "minimum": 0},
        "past_len": {"type": "integer", "minimum": 0}, "padding": {"type": "boolean"},
    },
}

ROLES = ("hidden", "wq", "wk", "wv", "wo", "positions", "attention_mask", "past_keys", "past_values")

PROTOCOLS = {
    FORWARD: VectorProtocol(
        FORWARD, {"hidden": "float64", "wq": "float64", "wk": "float64", "wv": "float64", "wo": "float64",
                  "positions": "int64", "attention_mask": "int64", "past_keys": "float64", "past_values": "float64",
                  "expected": "float64"},
        ROLES, PARAMS_SCHEMA, build_forward, compute_forward, shapes_forward, exact_forward, rounding="faithful",
        fresh=fresh_forward),
}
