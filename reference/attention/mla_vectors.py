"""MLA golden vectors: protocol ``attention.mla`` (reference/attention/mla.py).

Arrays (inputs first): ``q_nope`` [b, s, h, d_nope], ``q_pe`` [b, s, h, d_rope], ``k_nope``
[b, s, h, d_nope], ``k_pe`` [b, s, 1, d_rope] (one rope key per token, shared by the heads),
``v`` [b, s, h, d_v], ``positions`` [b, s] (int64); ``expected`` [b, s, h, d_v]. Seeded floats
are exactly representable in bfloat16 and float16 (reference.golden.inputs), the queries scaled
by 1/2 so that the logits stay of order 1 to 3 (the softmax is neither flat nor one-hot, and a
logit scale wrong by m^2 moves it). Parameters: num_heads, d_nope, d_rope, d_v, base, layout,
scaling (HF rope_parameters, YaRN with mscale and mscale_all_dim), causal.

The dims are DeepSeek-V2-Lite's and V3's scaled down (d_nope 128 -> 16, d_rope 64 -> 8, d_v 128
-> 16; their configs in reference/zoo/models/deepseek-v2-lite.json and deepseek-v3.json), with
their YaRN fields (factor 40 over 4096, beta 32 / 1; mscale = mscale_all_dim = 0.707 (V2) and 1.0
(V3)), plus configurations with mscale != mscale_all_dim (no released DeepSeek config has one)
so that reading the wrong field (Megatron) differs from omitting the factor (transformers'
DeepSeek-V2 before PR 47435). Causal rows see i + 1 keys: row 0's single key cannot show a scale,
every other row can (each case has s >= 6).

Every value is the nearest double to the exact one (mla._golden, mpmath at 192 bits), certified
faithfully rounded against mla_oracle.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import mpmath
import numpy as np

from reference.attention import mla, mla_oracle
from reference.golden.catalog import GroupSpec, TestGroupSpec, TestSpec, VectorProtocol
from reference.golden.inputs import representable_inputs

MLA = "attention.mla"
DEEPSEEK_V2 = "https://arxiv.org/abs/2405.04434"
HF_V3 = ("https://github.com/huggingface/transformers/blob/main/src/transformers/models/deepseek_v3/"
         "modeling_deepseek_v3.py")
HF_V2_FIX = "https://github.com/huggingface/transformers/pull/47435"
MEGATRON = "https://github.com/NVIDIA/Megatron-LM/issues/1429"
SCALE = {"q_nope": 0.5, "q_pe": 0.5, "k_nope": 1.0, "k_pe": 1.0, "v": 1.0}
ROLES = ("q_nope", "q_pe", "k_nope", "k_pe", "v", "positions")
D_NOPE, D_ROPE, D_V = 16, 8, 16


def yarn(factor, mscale, mscale_all_dim) -> dict:
    """DeepSeek's rope_scaling with the given factor and mscales (original length 4096, beta 32 / 1)."""
    return {"rope_type": "yarn", "factor": float(factor), "original_max_position_embeddings": 4096,
            "beta_fast": 32.0, "beta_slow": 1.0, "mscale": float(mscale), "mscale_all_dim": float(mscale_all_dim)}


V3 = yarn(40, 1.0, 1.0)
V2 = yarn(40, 0.707, 0.707)
# Configurations where mscale != mscale_all_dim: the rope part's cos and sin carry
# mscale(s, mscale) / mscale(s, mscale_all_dim) != 1, and m^2 from either field differs.
SPLIT_40 = yarn(40, 1.0, 0.707)
SPLIT_4 = yarn(4, 0.707, 1.0)

NOTES = {
    "MLA": {"bugType": "BASIC", "description": "Multi-head latent attention: logits (q_nope . k_nope + q_pe' . "
            "k_pe') times the softmax scale, with one rotated rope key per token shared by every head.",
            "links": [DEEPSEEK_V2, HF_V3]},
    "MscaleSoftmax": {"bugType": "EDGE_CASE", "description": "YaRN's softmax scale (d_nope + d_rope)^-1/2 m^2, "
                      "m = 0.1 mscale_all_dim ln(factor) + 1: transformers' DeepSeek-V2 and Mistral 4 attention "
                      "left m^2 out (fixed by PR 47435).", "links": [HF_V2_FIX, HF_V3]},
    "MscaleSplit": {"bugType": "EDGE_CASE", "description": "mscale != mscale_all_dim: m comes from "
                    "mscale_all_dim (Megatron-LM's MLA read mscale), and cos and sin carry "
                    "mscale(s, mscale) / mscale(s, mscale_all_dim).", "links": [MEGATRON, HF_V3]},
    "Interleaved": {"bugType": "FUNCTIONALITY", "description": "The rope features paired (2j, 2j+1), as "
                    "DeepSeek's checkpoints lay them out (transformers' rope_interleave).", "links": [HF_V3]},
    "HalfLayout": {"bugType": "FUNCTIONALITY", "description": "The rope features paired (j, j + d_rope/2) "
                   "(rotate_half), as a checkpoint permuted at conversion holds them.", "links": [HF_V3]},
    "LongPosition": {"bugType": "EDGE_CASE", "description": "Positions past original_max_position_embeddings, "
                     "where YaRN's interpolated frequencies matter.", "links": [DEEPSEEK_V2]},
}


@dataclass(frozen=True)
class MlaTest(TestSpec):
    positions: tuple = ()  # per batch row


def _rows(*rows):
    return tuple(tuple(r) for r in rows)


def params(scaling, layout="interleaved", heads=4, causal=True) -> dict:
    return {"num_heads": heads, "d_nope": D_NOPE, "d_rope": D_ROPE, "d_v": D_V, "base": 10000.0, "layout": layout,
            "scaling": scaling, "causal": causal}


def groups() -> list[GroupSpec]:
    T = MlaTest
    return [
        GroupSpec(MLA, "deepseek-v3-like", "DeepSeek-V3's MLA scaled down (4 heads, d_nope 16, d_rope 8, d_v 16, "
                  "interleaved rope pairs), YaRN factor 40 over 4096, mscale = mscale_all_dim = 1: m^2 = 1.874.", (
                      TestGroupSpec(params(V3), (
                          T("prefill-8", "Rows at positions 0..7 and 4090..4097.", ("MLA", "MscaleSoftmax",
                            "Interleaved"), _rows(range(8), range(4090, 4098))),
                          T("long-10", "Rows at 100000..100009 and 163830..163839 (V3's 163840 context).",
                            ("MLA", "MscaleSoftmax", "Interleaved", "LongPosition"),
                            _rows(range(100000, 100010), range(163830, 163840))),
                      )),)),
        GroupSpec(MLA, "deepseek-v2-lite-like", "DeepSeek-V2-Lite's MLA scaled down (2 heads), YaRN factor 40, "
                  "mscale = mscale_all_dim = 0.707: m^2 = 1.590, cos and sin unscaled.", (
                      TestGroupSpec(params(V2, heads=2), (
                          T("prefill-6", "Rows at positions 0..5 and 5000..5005.", ("MLA", "MscaleSoftmax",
                            "Interleaved", "LongPosition"), _rows(range(6), range(5000, 5006))),
                          T("prefill-12", "Rows at positions 20000..20011 and 12..23.", ("MLA", "MscaleSoftmax",
                            "Interleaved", "LongPosition"), _rows(range(20000, 20012), range(12, 24))),
                      )),)),
        GroupSpec(MLA, "mscale-split", "mscale != mscale_all_dim (3 heads): m from mscale_all_dim, cos and sin "
                  "times mscale(s, mscale) / mscale(s, mscale_all_dim).", (
                      TestGroupSpec(params(SPLIT_40, heads=3), (
                          T("factor-40-prefill-8", "Factor 40, mscale 1.0, mscale_all_dim 0.707; rows at 0..7 and "
                            "8000..8007.", ("MLA", "MscaleSoftmax", "MscaleSplit", "Interleaved", "LongPosition"),
                            _rows(range(8), range(8000, 8008))),
                      )),
                      TestGroupSpec(params(SPLIT_4, heads=3), (
                          T("factor-4-prefill-8", "Factor 4, mscale 0.707, mscale_all_dim 1.0; rows at 0..7 and "
                            "3000..3007.", ("MLA", "MscaleSoftmax", "MscaleSplit", "Interleaved"),
                            _rows(range(8), range(3000, 3008))),
                      )),
                  )),
        GroupSpec(MLA, "half-layout", "The rope features in the rotate_half layout, V3's YaRN (2 heads).", (
            TestGroupSpec(params(V3, layout="half", heads=2), (
                T("prefill-8", "Rows at positions 0..7 and 6000..6007.", ("MLA", "MscaleSoftmax", "HalfLayout"),
                  _rows(range(8), range(6000, 6008))),
            )),)),
    ]


CONFIGS = {"v3": V3, "v2": V2, "split-40": SPLIT_40, "split-4": SPLIT_4}


def fresh(draw) -> list:
    """One drawn case: a configuration of CONFIGS, either pair layout, 2 to 4 heads, 2 to 10 tokens
    (every query row past the first sees at least 2 keys) at a start in [0, 163830]."""
    kind = draw.choice(tuple(CONFIGS))
    layout = draw.choice(("interleaved", "half"))
    heads, s = draw.integer(2, 4), draw.integer(2, 10)
    starts = (draw.integer(0, 163830), draw.integer(0, 4096))
    p = params(CONFIGS[kind], layout, heads)
    return [TestGroupSpec(p, (MlaTest(
        "drawn", f"Drawn at run time: {kind} YaRN, {layout} pairs, {heads} heads, {s} tokens at {starts[0]} and "
        f"{starts[1]}.", (), _rows(range(starts[0], starts[0] + s), range(starts[1], starts[1] + s))),))]


def build(case_id, group_params, test):
    positions = np.array(test.positions, dtype=np.int64)
    b, s = positions.shape
    h = group_params["num_heads"]
    dn, dr, dv = group_params["d_nope"], group_params["d_rope"], group_params["d_v"]
    shapes = {"q_nope": (b, s, h, dn), "q_pe": (b, s, h, dr), "k_nope": (b, s, h, dn), "k_pe": (b, s, 1, dr),
              "v": (b, s, h, dv)}
    arrays = {role: representable_inputs(case_id, shape, role) * SCALE[role] for role, shape in shapes.items()}
    arrays["positions"] = positions
    return {}, arrays


def config_of(p) -> mla.MlaConfig:
    return mla.MlaConfig(int(p["num_heads"]), int(p["d_nope"]), int(p["d_rope"]), int(p["d_v"]),
                         float(p.get("base", 10000.0)), p.get("layout", "interleaved"), p.get("scaling"),
                         bool(p.get("causal", True)))


def _args(inputs):
    return tuple(inputs[r] for r in ROLES)


def compute(p, inputs, backend):
    return {"expected": mla.forward(*_args(inputs), config_of(p), mode="golden")}


def shapes(p, arrays):
    return {"expected": arrays["v"].shape}


def exact(p, inputs):
    with mpmath.workprec(240):
        return {"expected": mla_oracle.forward_exact(*_args(inputs), p)}


PARAMS_SCHEMA = {
    "type": "object", "additionalProperties": False,
    "required": ["num_heads", "d_nope", "d_rope", "d_v", "base", "layout", "scaling", "causal"],
    "properties": {
        "num_heads": {"type": "integer", "minimum": 1}, "d_nope": {"type": "integer", "minimum": 0},
        "d_rope": {"type": "integer", "minimum": 2}, "d_v": {"type": "integer", "minimum": 1},
        "base": {"type": "number"}, "layout": {"enum": ["half", "interleaved"]},
        "scaling": {"type": ["object", "null"]}, "causal": {"type": "boolean"},
    },
}

PROTOCOL = VectorProtocol(
    MLA, {"q_nope": "float64", "q_pe": "float64", "k_nope": "float64", "k_pe": "float64", "v": "float64",
          "positions": "int64", "expected": "float64"},
    ROLES, PARAMS_SCHEMA, build, compute, shapes, exact, rounding="faithful", fresh=fresh)
