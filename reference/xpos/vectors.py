"""xPos golden vectors: protocol ``xpos.apply``.

Arrays: ``q``, ``k`` [b, s, h, head_dim] (seeded, exactly representable in bfloat16 and float16),
``positions`` int64 [b, s] (shared by q and k), ``expected_q``, ``expected_k`` with the centring
c = 0 (the protocol grades up to a common centring), each value correctly rounded
(reference.xpos.apply, golden) and certified against oracle.py. Parameters: head_dim, rotary_dim,
base, layout, scale_base, gamma.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reference import xpos
from reference.golden import shapes as serving
from reference.golden.catalog import GroupSpec, TestGroupSpec, TestSpec, VectorProtocol
from reference.golden.inputs import representable_inputs
from reference.xpos import oracle

PROTOCOL = "xpos.apply"
XPOS = "https://arxiv.org/abs/2212.10554"
TORCHSCALE = "https://github.com/microsoft/torchscale/blob/main/torchscale/component/xpos_relative_position.py"

NOTES = {
    "Torchscale": {"bugType": "BASIC", "description": "torchscale's xPos: interleaved pairs, gamma 0.4, "
                   "scale_base 512, head 64.", "links": [XPOS, TORCHSCALE]},
    "Prefill": {"bugType": "BASIC", "description": "Positions 0..s-1.", "links": [XPOS]},
    "Decode": {"bugType": "FUNCTIONALITY", "description": "A single token at a large position: its scale "
               "exponent is (m - c)/B, with whatever centring the code uses.", "links": [XPOS]},
    "LargeScale": {"bugType": "EDGE_CASE", "description": "Positions where zeta^(-m/B) without centring "
                   "exceeds float32's range (m > 36000 for zeta_0 = 2/7): an implementation must centre, "
                   "and is graded up to its common centring.", "links": [XPOS, TORCHSCALE]},
    "HalfSplit": {"bugType": "FUNCTIONALITY", "description": "rotate_half pairs (j, j + r/2).", "links": [XPOS]},
    "Interleaved": {"bugType": "FUNCTIONALITY", "description": "Interleaved pairs (2i, 2i+1), as torchscale.",
                    "links": [TORCHSCALE]},
    "ShapeMatrix": {"bugType": "FUNCTIONALITY", "description": "A case of the serving shape matrix (fresh only): "
                    "batched decode, tile-boundary lengths and head counts at positions below 4096, a span that "
                    "a common centring keeps within float16's range. `--shapes full` grades the whole matrix, a "
                    "default run a few cheap cases.", "links": [XPOS]},
    "BatchedDecode": {"bugType": "FUNCTIONALITY", "description": "Continuous-batching decode: several rows of "
                      "one token each, every row at its own position (0 and 4095 among them). A fused kernel "
                      "that rotates and scales only batch row 0 there passes every batch-1 case.",
                      "links": [XPOS]},
    "TileBoundary": {"bugType": "EDGE_CASE", "description": "A sequence length at, just below or just above a "
                     "power-of-two tile (1 to 1000 tokens): a kernel that leaves a partial tile alone fails.",
                     "links": [XPOS]},
    "HeadCount": {"bugType": "EDGE_CASE", "description": "A head count of real models (1 to 64), never equal to "
                  "the batch or sequence size, so that code confusing two axes cannot pass by coincidence.",
                  "links": [XPOS]},
}


@dataclass(frozen=True)
class XposTest(TestSpec):
    positions: tuple = ()
    heads: int = 2


def xpos_params(head_dim, layout="interleaved", base=10000.0, scale_base=512.0, gamma=0.4) -> dict:
    return {"head_dim": head_dim, "rotary_dim": head_dim, "base": float(base), "layout": layout,
            "scale_base": float(scale_base), "gamma": float(gamma)}


def _t(name, comment, flags, rows):
    return XposTest(name, comment, tuple(flags), tuple(tuple(r) for r in rows))


def groups() -> list[GroupSpec]:
    return [
        GroupSpec(PROTOCOL, "torchscale-d64", "torchscale's defaults at head 64.", (TestGroupSpec(xpos_params(64), (
            _t("prefill-16", "Two sequences at positions 0..15.", ("Torchscale", "Prefill"), [range(16), range(16)]),
            _t("decode-4095", "One token at 4095: q scaled by zeta^(4095/512) down to 4e-5 for pair 0 "
               "(uncentred).", ("Torchscale", "Decode"), [[4095]]),
            _t("offsets", "Rows at 0..3 and 1000..1003.", ("Torchscale",), [range(0, 4), range(1000, 1004)]),
            _t("large-40000", "Positions 40000..40003: uncentred, zeta_0^(-m/B) is 3e42, past float32.",
               ("Torchscale", "LargeScale"), [range(40000, 40004)]),
        ), TORCHSCALE),)),
        GroupSpec(PROTOCOL, "half-d128", "xPos with rotate_half pairs at head 128.", (TestGroupSpec(
            xpos_params(128, "half"), (_t("prefill-8", "Positions 0..7, rotate_half pairs.", ("Prefill", "HalfSplit"), [range(8)]),),
            XPOS),)),
    ]


def _drawn_case(draw) -> list:
    """One case drawn at run time: head size, layout and positions."""
    b, s = draw.integer(1, 2), draw.integer(1, 6)
    start = draw.integer(0, 20000)
    rows = [draw.integers(start, start + 512, s) for _ in range(b)]
    return [TestGroupSpec(xpos_params(2 * draw.integer(2, 64), draw.choice(("interleaved", "half"))), (
        _t("drawn", f"Drawn at run time: {b} x {s} positions near {start}.", (), rows),))]


# The serving shape matrix (issue 14), as rope.apply's (reference/rope/vectors/fresh.py): batched decode,
# tile-boundary lengths and head counts, every position drawn from the run's seed. Positions stay
# below 4096: one call shares one centring c, and zeta_0^(-|m - c|/B) (zeta_0 = 2/7, B = 512)
# leaves float16's range once two rows are more than about 9000 positions apart, whatever c is.
# Sizes: the golden reference settles every output of q and k in mpmath, so the matrix keeps the
# shapes and drops the bulk: head 8 (4 pairs), one row per prefill, one head past 100 tokens,
# two tokens per head count: about 22 000 outputs of each of q and k, 4 s.
SHAPE_HEAD_DIM = 8
FAR_POSITION = 4095
SAMPLE_KINDS = ("decode", "seq", "heads")
SAMPLE_MAX_TOKEN_HEADS = 400  # the default sample draws among cases of at most this many (token, head)s
_LAYOUT_FLAG = {"half": "HalfSplit", "interleaved": "Interleaved"}


def _shape_case(kind, name, comment, flags, rows, heads, layout):
    test = XposTest(f"shape-{name}-{layout}", f"Drawn at run time (torchscale's gamma and scale base, head "
                    f"{SHAPE_HEAD_DIM}): {comment}", tuple(flags) + (_LAYOUT_FLAG[layout], "ShapeMatrix"),
                    tuple(tuple(r) for r in rows), heads)
    return kind, TestGroupSpec(xpos_params(SHAPE_HEAD_DIM, layout), (test,), TORCHSCALE)


def shape_matrix(draw) -> list:
    """[(kind, TestGroupSpec)] of the whole matrix (serving.matrix): batched decode in both pair
    layouts, the tile lengths and head counts alternating between them."""
    far = FAR_POSITION

    def decode(layout, b):
        rows = serving.decode_rows(draw, b, far)
        return _shape_case("decode", f"decode-b{b}", f"{b} rows of one token each, each at its own "
                           f"position ({rows[:3]}...; 0 and {far} included).", ("Decode", "BatchedDecode"),
                           [(p,) for p in rows], serving.heads_unlike(b, 1), layout)

    def seq(layout, n):
        start, heads = draw.integer(0, far + 1 - n), serving.seq_heads(n)
        return _shape_case("seq", f"seq-{n}", f"{n} tokens from position {start}, {heads} head(s).",
                           ("TileBoundary",), [range(start, start + n)], heads, layout)

    def heads(layout, h):
        return _shape_case("heads", f"heads-{h}", f"{h} heads, 2 tokens at drawn positions.",
                           ("HeadCount",), [draw.integers(0, far, 2)], h, layout)

    return serving.matrix(("interleaved", "half"), decode, seq, heads)


_token_heads = serving.token_heads
# xpos.apply's fresh cases: one drawn case, then the shape matrix: all of it when ``shapes`` is
# "full", else one cheap case of each kind of SAMPLE_KINDS (drawn).
fresh_groups = serving.fresh_cases(_drawn_case, shape_matrix, SAMPLE_KINDS, SAMPLE_MAX_TOKEN_HEADS)


def build_apply(case_id, params, test):
    positions = np.array(test.positions, dtype=np.int64)
    b, s = positions.shape
    shape = (b, s, test.heads, params["head_dim"])
    return {}, {"q": representable_inputs(case_id, shape, "q"), "k": representable_inputs(case_id, shape, "k"),
                "positions": positions}


def _kwargs(params):
    return dict(rotary_dim=params["rotary_dim"], base=params["base"], layout=params["layout"],
                scale_base=params["scale_base"], gamma=params["gamma"])


def compute_apply(params, inputs, backend):
    q, k = xpos.apply(inputs["q"], inputs["k"], inputs["positions"], backend=backend, mode="golden",
                      **_kwargs(params))
    return {"expected_q": q, "expected_k": k}


def shapes_apply(params, arrays):
    positions = arrays["positions"]
    if positions.ndim != 2:
        return {"positions": ("batch", "seq")}
    shape = positions.shape + ((arrays["q"].shape[2] if arrays["q"].ndim == 4 else "heads"), params["head_dim"])
    return {"q": shape, "k": shape, "expected_q": shape, "expected_k": shape}


def exact_apply(params, inputs):
    q, k = oracle.apply_exact(inputs["q"], inputs["k"], inputs["positions"], params["rotary_dim"], params["base"],
                              params["layout"], params["scale_base"], params["gamma"], 0.0)
    return {"expected_q": q, "expected_k": k}


PARAMS_SCHEMA = {
    "type": "object", "additionalProperties": False,
    "required": ["head_dim", "rotary_dim", "base", "layout", "scale_base", "gamma"],
    "properties": {
        "head_dim": {"type": "integer", "minimum": 4, "multipleOf": 2},
        "rotary_dim": {"type": "integer", "minimum": 4, "multipleOf": 2},
        "base": {"type": "number", "exclusiveMinimum": 0},
        "layout": {"enum": ["half", "interleaved"]},
        "scale_base": {"type": "number", "exclusiveMinimum": 0},
        "gamma": {"type": "number", "exclusiveMinimum": 0},
    },
}

PROTOCOLS = {
    PROTOCOL: VectorProtocol(
        PROTOCOL, {"q": "float64", "k": "float64", "positions": "int64", "expected_q": "float64",
                   "expected_k": "float64"}, ("q", "k", "positions"), PARAMS_SCHEMA, build_apply, compute_apply,
        shapes_apply, exact_apply, fresh=fresh_groups),
}
