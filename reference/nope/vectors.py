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

from reference import nope
from reference.golden import shapes as serving
from reference.golden.catalog import GroupSpec, TestGroupSpec, TestSpec, VectorProtocol
from reference.golden.inputs import representable_inputs
from reference.nope import oracle

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
    "ShapeMatrix": {"bugType": "FUNCTIONALITY", "description": "A case of the serving shape matrix (fresh only): "
                    "the shapes at which a model calls its NoPE layers while serving. `--shapes full` grades "
                    "the whole matrix, a default run one case of each kind.", "links": [HF_LLAMA4]},
    "BatchedDecode": {"bugType": "FUNCTIONALITY", "description": "Continuous-batching decode: several rows of "
                      "one token each, every row at its own position (0 and 131071 among them). A decode path "
                      "that reads or writes only batch row 0 passes every batch-1 case.", "links": [HF_LLAMA4]},
    "TileBoundary": {"bugType": "EDGE_CASE", "description": "A sequence length at, just below or just above a "
                     "power-of-two tile (1 to 1000 tokens): a kernel that drops the last partial tile fails.",
                     "links": [HF_LLAMA4]},
    "HeadCount": {"bugType": "EDGE_CASE", "description": "A head count of real models (1 to 64), never equal to "
                  "the batch or sequence size, so that code confusing two axes cannot pass by coincidence.",
                  "links": [HF_LLAMA4]},
    "LongPrefill": {"bugType": "FUNCTIONALITY", "description": "A prefill of 8192 tokens in one call (Llama 4's "
                    "attention chunk).", "links": [HF_LLAMA4]},
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


def _drawn_case(draw) -> list:
    b, s, h, d = draw.integer(1, 3), draw.integer(1, 6), draw.integer(1, 4), draw.choice((64, 96, 128))
    start = draw.integer(0, 2**20)
    positions = tuple(tuple(range(p, p + s)) for p in draw.integers(start, start + 4096, b))
    return [TestGroupSpec({"head_dim": d}, (NopeTest("drawn", f"Drawn at run time: {b} rows of {s} tokens, {h} "
                                                     f"heads, head dim {d}.", (), positions, h),))]


# The serving shape matrix (issue 14) with rope.apply's sizes (reference/rope/vectors/fresh.py): batched
# decode, tile-boundary lengths with two rows, head counts and a long prefill, at head 128 (Llama
# 4's and SmolLM3's), every position drawn from the run's seed. The expected output is x itself:
# about 2.6 million values, graded exactly in about a second.
SHAPE_HEAD_DIM = 128
SAMPLE_KINDS = ("decode", "seq", "heads")
SAMPLE_MAX_TOKEN_HEADS = 400  # the default sample draws among cases of at most this many (token, head)s


def _shape_case(kind, name, comment, flags, rows, heads):
    test = NopeTest(f"shape-{name}", f"Drawn at run time (head {SHAPE_HEAD_DIM}): {comment}",
                    ("NopeLayer",) + tuple(flags) + ("ShapeMatrix",), tuple(tuple(r) for r in rows), heads)
    return kind, TestGroupSpec({"head_dim": SHAPE_HEAD_DIM}, (test,), HF_LLAMA4)


def shape_matrix(draw) -> list:
    """[(kind, TestGroupSpec)] of the whole matrix: serving.matrix's kinds, then a long prefill."""
    far = serving.FAR_POSITION

    def decode(_variant, b):
        rows = serving.decode_rows(draw, b, far)
        return _shape_case("decode", f"decode-b{b}", f"{b} rows of one token each, each at its own position "
                           f"({rows[:3]}...; 0 and {far} included).", ("Decode", "BatchedDecode"),
                           [(p,) for p in rows], serving.heads_unlike(b, 1))

    def seq(_variant, n):
        starts = (draw.integer(0, 4096), draw.integer(0, far - n))
        return _shape_case("seq", f"seq-{n}", f"2 rows of {n} tokens from positions {list(starts)}.",
                           ("Prefill", "TileBoundary"), [range(s0, s0 + n) for s0 in starts],
                           serving.heads_unlike(2, n))

    def heads(_variant, h):
        rows = [draw.integers(0, 65535, 5) for _ in range(2)]
        return _shape_case("heads", f"heads-{h}", f"{h} heads, 2 rows of 5 tokens at drawn positions.",
                           ("HeadCount",), rows, h)

    out = serving.matrix((None,), decode, seq, heads)
    start = draw.integer(0, 4096)
    out.append(_shape_case("long", f"prefill-{serving.LONG_PREFILL}", f"a long prefill: "
                           f"{serving.LONG_PREFILL} tokens from position {start}.", ("Prefill", "LongPrefill"),
                           [range(start, start + serving.LONG_PREFILL)], 1))
    return out


_token_heads = serving.token_heads
# nope.apply's fresh cases: one drawn case, then the shape matrix: all of it when ``shapes`` is
# "full", else one case of each kind of SAMPLE_KINDS (drawn among the small ones).
fresh_apply = serving.fresh_cases(_drawn_case, shape_matrix, SAMPLE_KINDS, SAMPLE_MAX_TOKEN_HEADS)


def build_apply(case_id, params, test):
    pos = np.array(test.positions, dtype=np.int64)
    x = representable_inputs(case_id, (*pos.shape, test.heads, params["head_dim"]))
    return {}, {"x": x, "positions": pos}


def compute_apply(params, inputs, backend):
    return {"expected": nope.apply(inputs["x"], inputs["positions"], backend=backend, mode="golden")}


def shapes_apply(params, arrays):
    return {"expected": arrays["x"].shape}


def exact_apply(params, inputs):
    return {"expected": oracle.apply_exact(inputs["x"])}


PARAMS_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["head_dim"],
                 "properties": {"head_dim": {"type": "integer", "minimum": 1}}}

PROTOCOLS = {
    APPLY: VectorProtocol(APPLY, {"x": "float64", "positions": "int64", "expected": "float64"},
                          ("x", "positions"), PARAMS_SCHEMA, build_apply, compute_apply, shapes_apply,
                          exact_apply, fresh=fresh_apply),
}
