"""NoPE golden vectors: protocol ``nope.apply``.

Arrays: ``x`` [b, s, h, head_dim] (seeded, exactly representable in bfloat16), ``positions`` int64
[b, s], ``expected`` = x. The cases sit where an interleaved model calls its NoPE layers: every
fourth layer of Llama 4 and SmolLM3, with the head dim of those models (128), at prefill and at
decode positions past the RoPE layers' original context. Certified against oracle.py (the exact
value of each input double).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reference.golden.catalog import GroupSpec, TestGroupSpec, TestSpec, VectorProtocol
from reference.golden.inputs import representable_inputs

APPLY = "nope.apply"
HF_LLAMA4 = "https://github.com/huggingface/transformers/blob/main/src/transformers/models/llama4/modeling_llama4.py"
HF_SMOLLM3 = "https://github.com/huggingface/transformers/blob/main/src/transformers/models/smollm3/modeling_smollm3.py"
NOPE = "https://arxiv.org/abs/2305.19466"

NOTES = {
    "NopeLayer": {"bugType": "FUNCTIONALITY", "description": "A layer that takes no positional encoding in a "
                  "model that interleaves NoPE and RoPE layers: queries and keys pass through unchanged. "
                  "Applying RoPE (or adding anything) there is a bug.", "links": [HF_LLAMA4, HF_SMOLLM3, NOPE]},
    "Prefill": {"bugType": "BASIC", "description": "Prompt tokens at positions 0..s-1.", "links": [HF_LLAMA4]},
    "Decode": {"bugType": "FUNCTIONALITY", "description": "Decode tokens at large, different positions per batch "
               "row: a position-dependent change is largest there.", "links": [HF_SMOLLM3]},
}


@dataclass(frozen=True)
class NopeTest(TestSpec):
    positions: tuple = ()
    heads: int = 2


def groups() -> list[GroupSpec]:
    tests = (
        NopeTest("prefill-8", "Two rows of 8 prompt tokens at positions 0..7, 2 heads.", ("NopeLayer", "Prefill"),
                 (tuple(range(8)), tuple(range(8)))),
        NopeTest("decode-rows", "Three decode rows at positions 8191, 8192 and 131071 (past Llama 4's 8192-token "
                 "attention chunk), 3 heads.", ("NopeLayer", "Decode"), ((8191,), (8192,), (131071,)), 3),
    )
    return [GroupSpec(APPLY, "nope-layer-d128", "The NoPE layers of Llama 4 and SmolLM3 (head dim 128).",
                      (TestGroupSpec({"head_dim": 128}, tests),))]


def fresh_apply(draw) -> list:
    b, s, h, d = draw.integer(1, 3), draw.integer(1, 6), draw.integer(1, 4), draw.choice((64, 96, 128))
    start = draw.integer(0, 2**20)
    positions = tuple(tuple(range(p, p + s)) for p in draw.integers(start, start + 4096, b))
    return [TestGroupSpec({"head_dim": d}, (NopeTest("drawn", f"Drawn at run time: {b} rows of {s} tokens, {h} "
                                                     f"heads, head dim {d}.", (), positions, h),))]


def build_apply(case_id, params, test):
    pos = np.array(test.positions, dtype=np.int64)
    x = representable_inputs(case_id, (*pos.shape, test.heads, params["head_dim"]))
    return {}, {"x": x, "positions": pos}


def compute_apply(params, inputs, backend):
    from reference import nope

    return {"expected": nope.apply(inputs["x"], inputs["positions"], backend=backend, mode="golden")}


def shapes_apply(params, arrays):
    return {"expected": arrays["x"].shape}


def exact_apply(params, inputs):
    from reference.nope import oracle

    return {"expected": oracle.apply_exact(inputs["x"])}


PARAMS_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["head_dim"],
                 "properties": {"head_dim": {"type": "integer", "minimum": 1}}}

PROTOCOLS = {
    APPLY: VectorProtocol(APPLY, {"x": "float64", "positions": "int64", "expected": "float64"},
                          ("x", "positions"), PARAMS_SCHEMA, build_apply, compute_apply, shapes_apply,
                          exact_apply, fresh=fresh_apply),
}
