"""Gaussian-kernel RoPE golden vectors: protocols ``gaussian_rope.apply`` and ``gaussian_rope.score``.

Arrays: ``x`` [b, s, h, head_dim] (seeded, exactly representable in bfloat16 and float16),
``positions`` int64 [b, s], ``expected`` = K(m) R_m x [b, s, h, head_dim], every value correctly
rounded (reference.gaussian_rope.apply, golden mode) and certified against oracle.py. Parameters:
head_dim, rotary_dim, base, layout and kernel {a1, a2, s1, s2}.

``gaussian_rope.score``: ``q`` [b, sq, h, head_dim] at ``q_positions`` [b, sq] (m), ``k`` [b, sk, h,
head_dim] at ``k_positions`` [b, sk] (n), ``expected`` = K(n - m) q_m^T R_(n-m) k_n [b, h, sq, sk],
correctly rounded (reference.gaussian_rope.score, golden) and certified against oracle.score_exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reference import gaussian_rope
from reference.gaussian_rope import oracle
from reference.golden import shapes as serving
from reference.golden.catalog import GroupSpec, TestGroupSpec, TestSpec, VectorProtocol
from reference.golden.inputs import representable_inputs

PROTOCOL = "gaussian_rope.apply"
SCORE = "gaussian_rope.score"
SEED_DOC = "seed document 002 (Gaussian Kernel-enhanced Rotary Position Embedding)"
ROFORMER = "https://arxiv.org/abs/2104.09864"  # the rotation; the kernel is seed document 002's
DOCUMENT_KERNEL = {"a1": 0.7, "a2": 0.3, "s1": 5.0, "s2": 20.0}

NOTES = {
    "ModelConfig": {
        "bugType": "FUNCTIONALITY",
        "description": "A configuration from the zoo (reference/zoo/models/): its head size, kernel, base "
        "and sequence length, so an implementation of that configuration is graded on its own.",
        "links": [ROFORMER],
    },
    "DocumentExample": {
        "bugType": "BASIC",
        "description": "The seed document's example: dim 64, base 10000, K with a1 = 0.7, a2 = 0.3, "
        "s1 = 5, s2 = 20, sequences of 128; pairs (x_2i, x_2i+1) as in its formula.",
        "links": [ROFORMER],
    },
    "HalfSplit": {"bugType": "FUNCTIONALITY", "description": "Pairs (j, j + r/2) (rotate_half).",
                  "links": [ROFORMER]},
    "Interleaved": {"bugType": "FUNCTIONALITY", "description": "Pairs (2i, 2i+1), as the formula writes.",
                    "links": [ROFORMER]},
    "RowOffsets": {"bugType": "FUNCTIONALITY", "description": "Rows at different positions: K(m) must "
                   "use each token's position, not its index in the sequence.", "links": [ROFORMER]},
    "KernelUnderflow": {
        "bugType": "EDGE_CASE",
        "description": "Positions where K(m) underflows in float64: subnormal from m = 760 and exactly 0 "
        "from 772 for the document's kernel (the wider term a2 exp(-m^2/800) drops below 2^-1074). The "
        "expected outputs are the correctly rounded products, subnormals and zeros included; "
        "implementations in float32 or lower flush much earlier, within the budget's floor.",
        "links": [ROFORMER],
    },
    "WideKernel": {"bugType": "FUNCTIONALITY", "description": "A wide kernel (widths 64 and 1024) at "
                   "head 128: K stays well above underflow up to thousands of positions.", "links": [ROFORMER]},
    "ShapeMatrix": {"bugType": "FUNCTIONALITY", "description": "A case of the serving shape matrix (fresh only): "
                    "batched decode, tile-boundary lengths and head counts, with a kernel wide enough (widths "
                    "1024 and 65536) that K(m) carries every row's rotation up to position 131071. "
                    "`--shapes full` grades the whole matrix, a default run a few cheap cases.",
                    "links": [ROFORMER]},
    "BatchedDecode": {"bugType": "FUNCTIONALITY", "description": "Continuous-batching decode: several rows of "
                      "one token each, every row at its own position (0 and 131071 among them). A fused kernel "
                      "that rotates or scales only batch row 0 there passes every batch-1 case.",
                      "links": [ROFORMER]},
    "TileBoundary": {"bugType": "EDGE_CASE", "description": "A sequence length at, just below or just above a "
                     "power-of-two tile (1 to 1000 tokens): a kernel that leaves a partial tile unrotated fails.",
                     "links": [ROFORMER]},
    "HeadCount": {"bugType": "EDGE_CASE", "description": "A head count of real models (1 to 64), never equal to "
                  "the batch or sequence size, so that code confusing two axes cannot pass by coincidence.",
                  "links": [ROFORMER]},
}


@dataclass(frozen=True)
class GaussianTest(TestSpec):
    positions: tuple = ()
    heads: int = 2
    k_positions: tuple = ()  # score cases: the keys' positions (positions are the queries')


def gaussian_params(head_dim, layout, kernel=DOCUMENT_KERNEL, base=10000.0) -> dict:
    return {"head_dim": head_dim, "rotary_dim": head_dim, "base": float(base), "layout": layout,
            "kernel": dict(kernel)}


def _t(name, comment, flags, rows):
    return GaussianTest(name, comment, tuple(flags), tuple(tuple(r) for r in rows))


def groups() -> list[GroupSpec]:
    return apply_groups() + score_groups()


def apply_groups() -> list[GroupSpec]:
    def document(layout):
        flag = "Interleaved" if layout == "interleaved" else "HalfSplit"
        return TestGroupSpec(gaussian_params(64, layout), (
            _t("prefill-16", "Two sequences at positions 0..15: K falls from 1 to 0.234.",
               ("DocumentExample", flag), [range(16), range(16)]),
            _t("decode-127", "The last token of the document's 128-token sequence: K(127) = 5.3e-10.",
               ("DocumentExample", flag), [[127]]),
            _t("row-offsets", "Rows at 0..3, 40..43 and 100..103: each row's K from its own positions.",
               ("DocumentExample", flag, "RowOffsets"), [range(0, 4), range(40, 44), range(100, 104)]),
        ), SEED_DOC)

    return [
        GroupSpec(PROTOCOL, "document-interleaved", "The seed document's example in its own pair "
                  "layout (x_2i, x_2i+1).", (document("interleaved"),)),
        GroupSpec(PROTOCOL, "document-half", "The seed document's kernel with rotate_half pairs.",
                  (document("half"),)),
        GroupSpec(PROTOCOL, "underflow", "The document's kernel where it underflows.", (TestGroupSpec(
            gaussian_params(64, "half"), (_t("around-772", "Positions 600, 700, 740, 760, 768, 771, 772 "
                                             "and 1000: K from 1e-196 through subnormals to 0.",
                                             ("DocumentExample", "HalfSplit", "KernelUnderflow"),
                                             [[600, 700, 740, 760, 768, 771, 772, 1000]]),), SEED_DOC),)),
        GroupSpec(PROTOCOL, "wide-kernel", "a1 = a2 = 0.5, s1 = 64, s2 = 1024, head 128.", (TestGroupSpec(
            gaussian_params(128, "half", {"a1": 0.5, "a2": 0.5, "s1": 64.0, "s2": 1024.0}), (
                _t("prefill-8", "Positions 0..7: K from 1 down to 0.997.", ("WideKernel", "HalfSplit"), [range(8)]),
                _t("long", "Positions 100, 1000, 2047, 4095: K from 0.65 to 1.7e-4.", ("WideKernel", "HalfSplit"),
                   [[100, 1000, 2047, 4095]]),
            ), SEED_DOC),)),
    ]


def score_groups() -> list[GroupSpec]:
    def score_test(name, comment, flags, q_rows, k_rows):
        return GaussianTest(name, comment, tuple(flags), tuple(map(tuple, q_rows)), 2, tuple(map(tuple, k_rows)))

    return [GroupSpec(SCORE, "document-score", "The score form K(n - m) q^T R_(n-m) k with the seed "
                      "document's kernel at dim 64.", (TestGroupSpec(gaussian_params(64, "interleaved"), (
        score_test("square-8", "Queries and keys at positions 0..7: K(n - m) from 1 down to K(7) = 0.545.",
                   ("DocumentExample", "Interleaved"), [range(8)], [range(8)]),
        score_test("shifted-2p20", "Queries at 2^20 .. 2^20 + 3, keys at 2^20 - 4 .. 2^20 + 3: the score "
                   "form depends on n - m only, however large m is.", ("DocumentExample", "Interleaved"),
                   [range(2**20, 2**20 + 4)], [range(2**20 - 4, 2**20 + 4)]),
        score_test("far-keys", "One query at 127 against keys 0..3 and 124..127: K(n - m) is about 1e-9 "
                   "for the far keys (distances 124 to 127), near 1 for the close ones.",
                   ("DocumentExample", "Interleaved"),
                   [[127]], [[0, 1, 2, 3, 124, 125, 126, 127]]),
    ), SEED_DOC),))]


def fresh_scores(draw) -> list:
    """One score case drawn at run time: a kernel, a layout, queries and keys around a random start."""
    kernel = {"a1": draw.integer(1, 9) / 10, "a2": draw.integer(1, 9) / 10,
              "s1": float(draw.integer(2, 64)), "s2": float(draw.integer(16, 512))}
    layout = draw.choice(("half", "interleaved"))
    start, sq, sk = draw.integer(0, 2**20), draw.integer(1, 4), draw.integer(1, 6)
    q_rows = [draw.integers(start, start + 64, sq)]
    k_rows = [draw.integers(start, start + 64, sk)]
    flag = "Interleaved" if layout == "interleaved" else "HalfSplit"
    test = GaussianTest("drawn", f"Drawn at run time: kernel {kernel}, {sq} queries and {sk} keys near {start}.",
                        (flag,), tuple(map(tuple, q_rows)), 2, tuple(map(tuple, k_rows)))
    return [TestGroupSpec(gaussian_params(2 * draw.integer(2, 32), layout, kernel), (test,))]


def build_score(case_id: str, params: dict, test: GaussianTest):
    qp = np.array(test.positions, dtype=np.int64)
    kp = np.array(test.k_positions, dtype=np.int64)
    q = representable_inputs(case_id, (qp.shape[0], qp.shape[1], test.heads, params["head_dim"]), "q")
    k = representable_inputs(case_id, (kp.shape[0], kp.shape[1], test.heads, params["head_dim"]), "k")
    return {}, {"q": q, "k": k, "q_positions": qp, "k_positions": kp}


def compute_score(params: dict, inputs: dict, backend: str) -> dict:
    out = gaussian_rope.score(inputs["q"], inputs["k"], inputs["q_positions"], inputs["k_positions"],
                              kernel=params["kernel"], rotary_dim=params["rotary_dim"], base=params["base"],
                              layout=params["layout"], mode="golden")
    return {"expected": np.asarray(out, dtype=np.float64)}


def shapes_score(params: dict, arrays: dict) -> dict:
    qp, kp = arrays["q_positions"], arrays["k_positions"]
    if qp.ndim != 2 or kp.ndim != 2:
        return {"q_positions": ("batch", "sq"), "k_positions": ("batch", "sk")}
    heads = arrays["q"].shape[2] if arrays["q"].ndim == 4 else "heads"
    d = params["head_dim"]
    return {"q": (qp.shape[0], qp.shape[1], heads, d), "k": (kp.shape[0], kp.shape[1], heads, d),
            "expected": (qp.shape[0], heads, qp.shape[1], kp.shape[1])}


def exact_score(params: dict, inputs: dict) -> dict:
    return {"expected": oracle.score_exact(inputs["q"], inputs["k"], inputs["q_positions"], inputs["k_positions"],
                                           params["rotary_dim"], params["base"], params["layout"], params["kernel"])}


def _drawn_case(draw) -> list:
    """One case drawn at run time: a kernel, a layout and positions (reference.golden.fresh)."""
    kernel = {"a1": draw.integer(1, 9) / 10, "a2": draw.integer(1, 9) / 10,
              "s1": float(draw.integer(2, 64)), "s2": float(draw.integer(16, 512))}
    layout = draw.choice(("half", "interleaved"))
    b, s = draw.integer(1, 3), draw.integer(1, 6)
    rows = [draw.integers(0, 4 * int(kernel["s2"]), s) for _ in range(b)]
    flag = "Interleaved" if layout == "interleaved" else "HalfSplit"
    return [TestGroupSpec(gaussian_params(2 * draw.integer(2, 64), layout, kernel), (
        _t("drawn", f"Drawn at run time: kernel {kernel}, {b} x {s} positions.", (flag,), rows),))]


# The serving shape matrix (issue 14), as rope.apply's (reference/rope/vectors/fresh.py): batched decode,
# tile-boundary lengths and head counts, every position drawn from the run's seed. The kernel is
# wide (K(131071) = 0.068) so that far rows are not all zeros: with seed 002's kernel K underflows
# past m = 771 and a row left unrotated there would still match 0 within the floor. Sizes: the
# golden reference settles every output in mpmath (about 80 us each), so the matrix keeps the
# shapes and drops the bulk: head 8 (4 pairs), one row per prefill, one head past 100 tokens,
# two tokens per head count: about 22 000 outputs, 2 s.
SHAPE_KERNEL = {"a1": 0.5, "a2": 0.5, "s1": 1024.0, "s2": 65536.0}
SHAPE_HEAD_DIM = 8
SAMPLE_KINDS = ("decode", "seq", "heads")
SAMPLE_MAX_TOKEN_HEADS = 400  # the default sample draws among cases of at most this many (token, head)s


def _shape_case(kind, name, comment, flags, rows, heads, layout):
    flag = "Interleaved" if layout == "interleaved" else "HalfSplit"
    test = GaussianTest(f"shape-{name}-{layout}", f"Drawn at run time (kernel {SHAPE_KERNEL}, head "
                        f"{SHAPE_HEAD_DIM}): {comment}", tuple(flags) + (flag, "ShapeMatrix"),
                        tuple(tuple(r) for r in rows), heads)
    return kind, TestGroupSpec(gaussian_params(SHAPE_HEAD_DIM, layout, SHAPE_KERNEL), (test,), SEED_DOC)


def shape_matrix(draw) -> list:
    """[(kind, TestGroupSpec)] of the whole matrix (serving.matrix): batched decode in both pair
    layouts, the tile lengths and head counts alternating between them."""
    far = serving.FAR_POSITION

    def decode(layout, b):
        # Row 0 is never position 0 (K(0) R_0 is the identity); rows 1 and b-1 are the
        # farthest apart a 128K context allows.
        rows = serving.decode_rows(draw, b, far)
        return _shape_case("decode", f"decode-b{b}", f"{b} rows of one token each, each at its own "
                           f"position ({rows[:3]}...; 0 and {far} included).", ("BatchedDecode", "RowOffsets"),
                           [(p,) for p in rows], serving.heads_unlike(b, 1), layout)

    def seq(layout, n):
        start, heads = draw.integer(0, far - n), serving.seq_heads(n)
        return _shape_case("seq", f"seq-{n}", f"{n} tokens from position {start}, {heads} head(s).",
                           ("TileBoundary",), [range(start, start + n)], heads, layout)

    def heads(layout, h):
        return _shape_case("heads", f"heads-{h}", f"{h} heads, 2 tokens at drawn positions.",
                           ("HeadCount",), [draw.integers(0, 65535, 2)], h, layout)

    return serving.matrix(("half", "interleaved"), decode, seq, heads)


_token_heads = serving.token_heads
# gaussian_rope.apply's fresh cases: one drawn case, then the shape matrix: all of it when
# ``shapes`` is "full", else one cheap case of each kind of SAMPLE_KINDS (drawn).
fresh_groups = serving.fresh_cases(_drawn_case, shape_matrix, SAMPLE_KINDS, SAMPLE_MAX_TOKEN_HEADS)


def build_apply(case_id: str, params: dict, test: GaussianTest):
    positions = np.array(test.positions, dtype=np.int64)
    b, s = positions.shape
    x = representable_inputs(case_id, (b, s, test.heads, params["head_dim"]))
    return {}, {"x": x, "positions": positions}


def compute_apply(params: dict, inputs: dict, backend: str) -> dict:
    out = gaussian_rope.apply(inputs["x"], inputs["positions"], kernel=params["kernel"],
                              rotary_dim=params["rotary_dim"], base=params["base"], layout=params["layout"],
                              backend=backend, mode="golden")
    return {"expected": np.asarray(out, dtype=np.float64)}


def shapes_apply(params: dict, arrays: dict) -> dict:
    positions = arrays["positions"]
    if positions.ndim != 2:
        return {"positions": ("batch", "seq")}
    shape = arrays["x"].shape if arrays["x"].ndim == 4 else ("batch", "seq", "heads", params["head_dim"])
    return {"x": shape, "expected": shape}


def exact_apply(params: dict, inputs: dict) -> dict:
    return {"expected": oracle.apply_exact(inputs["x"], inputs["positions"], params["rotary_dim"], params["base"],
                                           params["layout"], params["kernel"])}


_KERNEL = {"type": "object", "additionalProperties": False, "required": ["a1", "a2", "s1", "s2"],
           "properties": {"a1": {"type": "number", "minimum": 0}, "a2": {"type": "number", "minimum": 0},
                          "s1": {"type": "number", "exclusiveMinimum": 0},
                          "s2": {"type": "number", "exclusiveMinimum": 0}}}
PARAMS_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["head_dim", "rotary_dim", "base", "layout", "kernel"],
    "properties": {
        "head_dim": {"type": "integer", "minimum": 2, "multipleOf": 2},
        "rotary_dim": {"type": "integer", "minimum": 2, "multipleOf": 2},
        "base": {"type": "number", "exclusiveMinimum": 0},
        "layout": {"enum": ["half", "interleaved"]},
        "kernel": _KERNEL,
    },
}

PROTOCOLS = {
    PROTOCOL: VectorProtocol(
        PROTOCOL, {"x": "float64", "positions": "int64", "expected": "float64"}, ("x", "positions"),
        PARAMS_SCHEMA, build_apply, compute_apply, shapes_apply, exact_apply, fresh=fresh_groups),
    SCORE: VectorProtocol(
        SCORE, {"q": "float64", "k": "float64", "q_positions": "int64", "k_positions": "int64",
                "expected": "float64"}, ("q", "k", "q_positions", "k_positions"),
        PARAMS_SCHEMA, build_score, compute_score, shapes_score, exact_score, fresh=fresh_scores),
}
