"""Axial 2-D RoPE golden vectors: protocol ``rope2d.apply``.

Arrays: ``x`` [b, s, h, head_dim] (seeded, exactly representable in bfloat16 and float16),
``coords`` int64 [b, s, 2] = (x, y) = (column, row) of each patch ((-1, -1) for CLS tokens, which
are not rotated), ``expected``, every value
correctly rounded (reference.rope2d.apply, golden) and certified against oracle.py. Parameters:
head_dim, base, layout, order (["x", "y"] or ["y", "x"]), cls_tokens, freqs (null for the axial
form; [2][heads][head_dim/2] for RoPE-Mixed).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reference import rope2d
from reference.golden import shapes as serving
from reference.golden.catalog import GroupSpec, TestGroupSpec, TestSpec, VectorProtocol
from reference.golden.inputs import representable_inputs
from reference.rope2d import oracle

PROTOCOL = "rope2d.apply"
ROPE_VIT = "https://arxiv.org/abs/2403.13298"
QWEN2_VL = "https://github.com/huggingface/transformers/blob/main/src/transformers/models/qwen2_vl/modeling_qwen2_vl.py"

NOTES = {
    "RopeVit": {"bugType": "BASIC", "description": "RoPE-ViT's axial form: theta_k = 100^(-4k/d), the first d/4 "
                "pairs rotate by the column x, the last d/4 by the row y, interleaved pairs; the CLS token "
                "is not rotated.", "links": [ROPE_VIT]},
    "Qwen2VLVision": {"bugType": "BASIC", "description": "Qwen2-VL's vision encoder: theta_k = 10000^(-4k/d), the "
                      "first d/4 pairs by the row h, the last by the column w, rotate_half pairs, no CLS.",
                      "links": [QWEN2_VL]},
    "NonSquare": {"bugType": "EDGE_CASE", "description": "A grid with more columns than rows: a swapped x and y "
                  "show.", "links": [ROPE_VIT]},
    "ShapeMatrix": {"bugType": "FUNCTIONALITY", "description": "A case of the serving shape matrix (fresh only): "
                    "batched single-patch rows, tile-boundary lengths and head counts at head 16, coordinates up "
                    "to 4095. `--shapes full` grades the whole matrix, a default run a few cheap cases.",
                    "links": [ROPE_VIT, QWEN2_VL]},
    "BatchedDecode": {"bugType": "FUNCTIONALITY", "description": "A batch of rows of one patch each, every row "
                      "at its own (x, y) ((0, 0) and (4095, 4095) among them): code that takes the coordinates "
                      "of row 0 for every row, or rotates only row 0, passes every batch-1 case.",
                      "links": [QWEN2_VL]},
    "TileBoundary": {"bugType": "EDGE_CASE", "description": "A sequence length at, just below or just above a "
                     "power-of-two tile (1 to 1000 tokens, the CLS token included): a kernel that leaves a "
                     "partial tile unrotated fails.", "links": [ROPE_VIT]},
    "HeadCount": {"bugType": "EDGE_CASE", "description": "A head count of real models (1 to 64), never equal to "
                  "the batch or sequence size, so that code confusing two axes cannot pass by coincidence.",
                  "links": [ROPE_VIT]},
}


@dataclass(frozen=True)
class GridTest(TestSpec):
    rows: int = 2
    cols: int = 3
    cls_tokens: int = 0
    heads: int = 2
    coords: tuple | None = None  # explicit (x, y) per token per row instead of the grid (shape matrix)


def grid_coords(rows, cols, cls_tokens):
    """Row-major (x, y) of a rows x cols grid, after cls_tokens leading CLS entries marked (-1, -1)
    (they are not rotated; the mark makes code that rotates them anyway show)."""
    coords = [(-1, -1)] * cls_tokens + [(x, y) for y in range(rows) for x in range(cols)]
    return np.array([coords], dtype=np.int64)


def rope2d_params(head_dim, base, layout, order, cls_tokens, freqs=None) -> dict:
    return {"head_dim": head_dim, "base": float(base), "layout": layout, "order": list(order),
            "cls_tokens": cls_tokens, "freqs": freqs}


def mixed_freqs(heads=2, pairs=8):
    """RoPE-Mixed's per-head frequencies, dyadic (exact in float64): head h's (f_x, f_y) turn the
    ladder 2^-k by a different direction per head."""
    fx = [[2.0 ** -(i // 2) * (1.0 if h == 0 else 0.5) for i in range(pairs)] for h in range(heads)]
    fy = [[2.0 ** -(i // 2) * (0.25 if h == 0 else 0.75) for i in range(pairs)] for h in range(heads)]
    return [fx, fy]


def groups() -> list[GroupSpec]:
    return [
        GroupSpec(PROTOCOL, "rope-vit-b16", "RoPE-ViT-B/16 (head 64) on a 4 x 7 patch grid with a CLS token.",
                  (TestGroupSpec(rope2d_params(64, 100.0, "interleaved", ("x", "y"), 1), (
                      GridTest("grid-4x7", "A CLS token, then 4 rows of 7 patches (x = 0..6, y = 0..3).",
                               ("RopeVit", "NonSquare"), 4, 7, 1),
                      GridTest("grid-14x14-corner", "The last 2 rows of a 14 x 14 grid (x up to 13).",
                               ("RopeVit",), 14, 14, 1),
                  ), ROPE_VIT),)),
        GroupSpec(PROTOCOL, "rope-mixed", "RoPE-Mixed (RoPE-ViT): learned per-head frequencies (f_x, f_y), "
                  "pair i of head h turned by x f_x + y f_y; head 16, 2 heads, CLS token.",
                  (TestGroupSpec(rope2d_params(16, 100.0, "interleaved", ("x", "y"), 1, mixed_freqs()), (
                      GridTest("grid-3x4", "A CLS token, then 3 rows of 4 patches with mixed frequencies.",
                               ("RopeVit", "NonSquare"), 3, 4, 1),
                  ), ROPE_VIT),)),
        GroupSpec(PROTOCOL, "qwen2-vl-vision", "Qwen2-VL's vision encoder (head 80) on a 3 x 5 grid.",
                  (TestGroupSpec(rope2d_params(80, 10000.0, "half", ("y", "x"), 0), (
                      GridTest("grid-3x5", "3 rows of 5 patches: h = 0..2, w = 0..4.", ("Qwen2VLVision", "NonSquare"), 3, 5, 0),
                  ), QWEN2_VL),)),
    ]


def _drawn_case(draw) -> list:
    rows, cols = draw.integer(1, 6), draw.integer(1, 6)
    vit = draw.choice((True, False))
    params = (rope2d_params(64, 100.0, "interleaved", ("x", "y"), 1) if vit
              else rope2d_params(80, 10000.0, "half", ("y", "x"), 0))
    return [TestGroupSpec(params, (GridTest("drawn", f"Drawn at run time: a {rows} x {cols} grid.", (), rows, cols,
                                            params["cls_tokens"]),))]


# The serving shape matrix (issue 14), as rope.apply's (reference/rope/vectors/fresh.py): batched rows of
# one patch, tile-boundary lengths and head counts, every coordinate drawn from the run's seed.
# Coordinates go up to 4095 (a 4096 x 4096 patch grid), the 2-D counterpart of rope.apply's
# 131071. Sizes: the golden reference settles every output in mpmath (about 80 us each), so the
# matrix keeps the shapes and drops the bulk: head 16 (both configurations' ladders and pair
# layouts), one row per prefill, one head past 100 tokens, two tokens per head count: about
# 45 000 outputs, 3 s.
SHAPE_HEAD_DIM = 16
FAR_COORD = 4095
SAMPLE_KINDS = ("decode", "seq", "heads")
SAMPLE_MAX_TOKEN_HEADS = 400  # the default sample draws among cases of at most this many (token, head)s


def _shape_params(config, cls_tokens=0) -> dict:
    """RoPE-ViT's axial form ("vit") or Qwen2-VL's vision encoder ("qwen2-vl") at head 16."""
    if config == "vit":
        return rope2d_params(SHAPE_HEAD_DIM, 100.0, "interleaved", ("x", "y"), cls_tokens)
    return rope2d_params(SHAPE_HEAD_DIM, 10000.0, "half", ("y", "x"), 0)


def _shape_case(kind, name, comment, flags, coords, heads, config, cls_tokens=0):
    test = GridTest(f"shape-{name}-{config}", f"Drawn at run time ({config}'s ladder and pairs at head "
                    f"{SHAPE_HEAD_DIM}): {comment}", tuple(flags) + ("ShapeMatrix",), cls_tokens=cls_tokens,
                    heads=heads, coords=tuple(tuple(tuple(c) for c in row) for row in coords))
    return kind, TestGroupSpec(_shape_params(config, cls_tokens), (test,), ROPE_VIT if config == "vit" else QWEN2_VL)


def _patches(draw, count, fixed):
    """``count`` distinct (x, y) in the 4096 x 4096 grid (drawn), with fixed {token: (x, y)} set."""
    side = FAR_COORD + 1
    flat = serving.distinct_rows(draw, count, 1, side * side - 2,
                                       {k: y * side + x for k, (x, y) in fixed.items()})
    return [(f % side, f // side) for f in flat]


def shape_matrix(draw) -> list:
    """[(kind, TestGroupSpec)] of the whole matrix (serving.matrix): batched single patches in both
    configurations (no CLS token: a row of one CLS token would not rotate), the tile lengths and
    head counts alternating between them (the vit prefills open with a CLS token)."""
    far = FAR_COORD

    def decode(config, b):
        fixed = {1: (far, far), b - 1: (0, 0)} if b > 2 else {1: (far, far)}
        pts = _patches(draw, b, fixed)
        return _shape_case("decode", f"decode-b{b}", f"{b} rows of one patch each, each at its own "
                           f"(x, y) ({pts[:3]}...; (0, 0) and ({far}, {far}) included).", ("BatchedDecode",),
                           [[p] for p in pts], serving.heads_unlike(b, 1), config)

    def seq(config, n):
        cls = 1 if config == "vit" else 0
        width = draw.integer(1, 64)
        x0, y0 = draw.integer(0, far - 63), draw.integer(0, far - (n - cls) // width - 1)
        row = [(-1, -1)] * cls + [(x0 + j % width, y0 + j // width) for j in range(n - cls)]
        heads = serving.seq_heads(n)
        return _shape_case("seq", f"seq-{n}", f"{n} tokens: {cls} CLS, then patches row by row of a window "
                           f"{width} wide from ({x0}, {y0}); {heads} head(s).", ("TileBoundary",), [row],
                           heads, config, cls)

    def heads(config, h):
        pts = _patches(draw, 2, {})
        return _shape_case("heads", f"heads-{h}", f"{h} heads, 2 patches at {pts}.", ("HeadCount",), [pts], h,
                           config)

    return serving.matrix(("qwen2-vl", "vit"), decode, seq, heads)


def _coords(test):
    """A grid test's rows of tokens: its (x, y) rows."""
    return test.coords


def _token_heads(tg) -> int:
    return serving.token_heads(tg, _coords)


# rope2d.apply's fresh cases: one drawn grid, then the shape matrix: all of it when ``shapes`` is
# "full", else one cheap case of each kind of SAMPLE_KINDS (drawn).
fresh_groups = serving.fresh_cases(_drawn_case, shape_matrix, SAMPLE_KINDS, SAMPLE_MAX_TOKEN_HEADS, _coords)


def build_apply(case_id, params, test):
    if test.coords is not None:  # the shape matrix: coordinates given per row
        coords = np.array(test.coords, dtype=np.int64).reshape(len(test.coords), -1, 2)
        b, s, _ = coords.shape
        return {}, {"x": representable_inputs(case_id, (b, s, test.heads, params["head_dim"])), "coords": coords}
    coords = grid_coords(test.rows, test.cols, test.cls_tokens)
    if test.name.endswith("corner"):
        coords = np.concatenate([coords[:, :1], coords[:, 1 + 12 * 14:]], axis=1)  # CLS + the last two rows
    b, s, _ = coords.shape
    return {}, {"x": representable_inputs(case_id, (b, s, test.heads, params["head_dim"])), "coords": coords}


def _kwargs(params):
    return dict(base=params["base"], layout=params["layout"], order=tuple(params["order"]),
                cls_tokens=params["cls_tokens"], freqs=params["freqs"])


def compute_apply(params, inputs, backend):
    return {"expected": rope2d.apply(inputs["x"], inputs["coords"], backend=backend, mode="golden", **_kwargs(params))}


def shapes_apply(params, arrays):
    coords = arrays["coords"]
    if coords.ndim != 3 or coords.shape[2] != 2:
        return {"coords": ("batch", "seq", 2)}
    shape = coords.shape[:2] + ((arrays["x"].shape[2] if arrays["x"].ndim == 4 else "heads"), params["head_dim"])
    return {"x": shape, "expected": shape}


def exact_apply(params, inputs):
    if params["freqs"] is not None:
        return {"expected": oracle.mixed_exact(inputs["x"], inputs["coords"], params["freqs"], params["layout"],
                                               params["cls_tokens"])}
    return {"expected": oracle.apply_exact(inputs["x"], inputs["coords"], params["base"], params["layout"],
                                           tuple(params["order"]), params["cls_tokens"])}


PARAMS_SCHEMA = {
    "type": "object", "additionalProperties": False,
    "required": ["head_dim", "base", "layout", "order", "cls_tokens", "freqs"],
    "properties": {
        "head_dim": {"type": "integer", "minimum": 4, "multipleOf": 4},
        "base": {"type": "number", "exclusiveMinimum": 0},
        "layout": {"enum": ["half", "interleaved"]},
        "order": {"enum": [["x", "y"], ["y", "x"]]},
        "cls_tokens": {"type": "integer", "minimum": 0},
        "freqs": {"type": ["null", "array"], "items": {"type": "array", "items": {"type": "array",
                  "items": {"type": "number"}}}, "minItems": 2, "maxItems": 2},
    },
}

PROTOCOLS = {
    PROTOCOL: VectorProtocol(PROTOCOL, {"x": "float64", "coords": "int64", "expected": "float64"}, ("x", "coords"),
                             PARAMS_SCHEMA, build_apply, compute_apply, shapes_apply, exact_apply, fresh=fresh_groups),
}
