"""rope.qk_norm golden vectors: RMSNorm of q and k (per head: Qwen3; over the whole projection:
OLMo 2) then RoPE (reference/rope/qk_norm.py).

Arrays (inputs first): ``q`` [b, s, hq, d], ``k`` [b, s, hkv, d], ``positions`` [b, s] (int64),
``q_weight``, ``k_weight`` ([d] for scope "head", [h d] for "full"); ``q_expected``,
``k_expected``. Seeded floats are exactly representable in bfloat16 and float16
(reference.golden.inputs): q, k in [-2, 2), the weights |x| in [2^-6, 2) (non-uniform and positive,
as trained norm weights are: with a uniform weight the norm would commute with the rotation and
the order could not be told). Parameters: num_heads, num_kv_heads, head_dim, rotary_dim, base,
layout, scaling, eps, norm_scope. Every value is the nearest double to the exact one (mpmath at
192 bits), certified faithfully rounded against qk_norm_oracle.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import mpmath
import numpy as np

from reference.golden.catalog import GroupSpec, TestGroupSpec, TestSpec, VectorProtocol
from reference.golden.inputs import representable_inputs
from reference.rope import qk_norm, qk_norm_oracle

QK_NORM = "rope.qk_norm"
HF_QWEN3 = "https://github.com/huggingface/transformers/blob/main/src/transformers/models/qwen3/modeling_qwen3.py"
HF_OLMO2 = "https://github.com/huggingface/transformers/blob/main/src/transformers/models/olmo2/modeling_olmo2.py"
RMSNORM = "https://arxiv.org/abs/1910.07467"

NOTES = {
    "QkNormHead": {"bugType": "BASIC", "description": "RMSNorm over each head's head_dim features with a weight "
                   "[head_dim] (Qwen3's q_norm / k_norm), then RoPE.", "links": [HF_QWEN3, RMSNORM]},
    "QkNormFull": {"bugType": "BASIC", "description": "RMSNorm over the token's whole projection (heads x "
                   "head_dim, OLMo 2's q_norm / k_norm before the split into heads), then RoPE.",
                   "links": [HF_OLMO2, RMSNORM]},
    "NormOrder": {"bugType": "EDGE_CASE", "description": "Non-uniform norm weights: RoPE before the norm gives "
                  "another result (with a uniform weight the two orders agree).", "links": [HF_QWEN3]},
}


@dataclass(frozen=True)
class QkNormTest(TestSpec):
    positions: tuple = ()


def _rows(*rows):
    return tuple(tuple(r) for r in rows)


def params(scope, hq=4, hkv=2, d=16, base=1000000.0, eps=1e-6, rotary_dim=16, layout="half") -> dict:
    return {"num_heads": hq, "num_kv_heads": hkv, "head_dim": d, "rotary_dim": rotary_dim, "base": base,
            "layout": layout, "scaling": None, "eps": eps, "norm_scope": scope}


def groups() -> list[GroupSpec]:
    T = QkNormTest
    return [
        GroupSpec(QK_NORM, "qwen3-like", "Qwen3's QK-norm (per head, eps 1e-6) then RoPE (base 1e6, rotate_half), "
                  "4 query heads over 2 kv heads, head_dim 16.", (TestGroupSpec(params("head"), (
                      T("prefill-6", "Rows at positions 0..5 and 4090..4095.", ("QkNormHead", "NormOrder"),
                        _rows(range(6), range(4090, 4096))),
                  )),)),
        GroupSpec(QK_NORM, "olmo2-like", "OLMo 2's QK-norm (over the whole projection, eps 1e-6) then RoPE (base "
                  "500000), 4 heads, head_dim 16.", (TestGroupSpec(params("full", hkv=4, base=500000.0), (
                      T("prefill-6", "Rows at positions 0..5 and 1000..1005.", ("QkNormFull", "NormOrder"),
                        _rows(range(6), range(1000, 1006))),
                  )),)),
        GroupSpec(QK_NORM, "partial-interleaved", "Per-head QK-norm then interleaved RoPE over 8 of 16 features.",
                  (TestGroupSpec(params("head", rotary_dim=8, layout="interleaved", base=10000.0), (
                      T("prefill-4", "Rows at positions 0..3 and 70..73.", ("QkNormHead", "NormOrder"),
                        _rows(range(4), range(70, 74))),
                  )),)),
    ]


def fresh(draw) -> list:
    """One drawn case: either scope, 1 to 8 tokens at a start in [0, 32768], 2 or 4 kv heads."""
    scope = draw.choice(("head", "full"))
    hkv = draw.choice((2, 4))
    s, start = draw.integer(1, 8), draw.integer(0, 32768)
    p = params(scope, hkv=hkv, base=1000000.0 if scope == "head" else 500000.0)
    return [TestGroupSpec(p, (QkNormTest("drawn", f"Drawn at run time: scope {scope}, 4 query heads over {hkv} "
                                         f"kv heads, {s} tokens at {start}.", (),
                                         _rows(range(start, start + s), range(start + 3, start + 3 + s))),))]


def build(case_id, p, test):
    positions = np.array(test.positions, dtype=np.int64)
    b, s = positions.shape
    hq, hkv, d = p["num_heads"], p["num_kv_heads"], p["head_dim"]
    full = p["norm_scope"] == "full"
    arrays = {"q": representable_inputs(case_id, (b, s, hq, d), "q"),
              "k": representable_inputs(case_id, (b, s, hkv, d), "k"), "positions": positions,
              "q_weight": np.abs(representable_inputs(case_id, (hq * d if full else d,), "q_weight")),
              "k_weight": np.abs(representable_inputs(case_id, (hkv * d if full else d,), "k_weight"))}
    return {}, arrays


ROLES = ("q", "k", "positions", "q_weight", "k_weight")


def _kw(p):
    return dict(rotary_dim=int(p.get("rotary_dim") or p["head_dim"]), base=float(p["base"]),
                layout=p.get("layout", "half"), scaling=p.get("scaling"), eps=float(p["eps"]), scope=p["norm_scope"])


def compute(p, inputs, backend):
    q, k = qk_norm.forward(*(inputs[r] for r in ROLES), **_kw(p), mode="golden")
    return {"q_expected": q, "k_expected": k}


def shapes(p, arrays):
    return {"q_expected": arrays["q"].shape, "k_expected": arrays["k"].shape}


def exact(p, inputs):
    with mpmath.workprec(240):
        return {"q_expected": qk_norm_oracle.forward_exact(inputs["q"], inputs["positions"], inputs["q_weight"], p),
                "k_expected": qk_norm_oracle.forward_exact(inputs["k"], inputs["positions"], inputs["k_weight"], p)}


PARAMS_SCHEMA = {
    "type": "object", "additionalProperties": False,
    "required": ["num_heads", "num_kv_heads", "head_dim", "rotary_dim", "base", "layout", "scaling", "eps",
                 "norm_scope"],
    "properties": {
        "num_heads": {"type": "integer", "minimum": 1}, "num_kv_heads": {"type": "integer", "minimum": 1},
        "head_dim": {"type": "integer", "minimum": 2}, "rotary_dim": {"type": "integer", "minimum": 2},
        "base": {"type": "number"}, "layout": {"enum": ["half", "interleaved"]},
        "scaling": {"type": ["object", "null"]}, "eps": {"type": "number"}, "norm_scope": {"enum": ["head", "full"]},
    },
}

PROTOCOL = VectorProtocol(
    QK_NORM, {"q": "float64", "k": "float64", "positions": "int64", "q_weight": "float64", "k_weight": "float64",
              "q_expected": "float64", "k_expected": "float64"},
    ROLES, PARAMS_SCHEMA, build, compute, shapes, exact, rounding="faithful", fresh=fresh)
