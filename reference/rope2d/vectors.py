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

from reference.golden.catalog import GroupSpec, TestGroupSpec, TestSpec, VectorProtocol
from reference.golden.inputs import representable_inputs

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
}


@dataclass(frozen=True)
class GridTest(TestSpec):
    rows: int = 2
    cols: int = 3
    cls_tokens: int = 0
    heads: int = 2


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


def fresh_groups(draw) -> list:
    rows, cols = draw.integer(1, 6), draw.integer(1, 6)
    vit = draw.choice((True, False))
    params = (rope2d_params(64, 100.0, "interleaved", ("x", "y"), 1) if vit
              else rope2d_params(80, 10000.0, "half", ("y", "x"), 0))
    return [TestGroupSpec(params, (GridTest("drawn", f"Drawn at run time: a {rows} x {cols} grid.", (), rows, cols,
                                            params["cls_tokens"]),))]


def build_apply(case_id, params, test):
    coords = grid_coords(test.rows, test.cols, test.cls_tokens)
    if test.name.endswith("corner"):
        coords = np.concatenate([coords[:, :1], coords[:, 1 + 12 * 14:]], axis=1)  # CLS + the last two rows
    b, s, _ = coords.shape
    return {}, {"x": representable_inputs(case_id, (b, s, test.heads, params["head_dim"])), "coords": coords}


def _kwargs(params):
    return dict(base=params["base"], layout=params["layout"], order=tuple(params["order"]),
                cls_tokens=params["cls_tokens"], freqs=params["freqs"])


def compute_apply(params, inputs, backend):
    from reference import rope2d

    return {"expected": rope2d.apply(inputs["x"], inputs["coords"], backend=backend, mode="golden", **_kwargs(params))}


def shapes_apply(params, arrays):
    coords = arrays["coords"]
    if coords.ndim != 3 or coords.shape[2] != 2:
        return {"coords": ("batch", "seq", 2)}
    shape = coords.shape[:2] + ((arrays["x"].shape[2] if arrays["x"].ndim == 4 else "heads"), params["head_dim"])
    return {"x": shape, "expected": shape}


def exact_apply(params, inputs):
    from reference.rope2d import oracle

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
