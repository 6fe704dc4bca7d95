"""Golden vectors of ``mrope.decode``: two generations on one session (reference.mrope.decode).

A case is a script of two generations. Generation g (1, 2) stores ``token_types_g`` [b, s_g]
(0 text, 1 image token), ``grids_g`` [images, 3] (after the spatial merge, as mrope.positions)
and ``cache_positions_g`` [steps] (the decoded tokens' indices, from s_g on); the answer
``expected_g`` [3, b, s_g + steps] is the prompt's positions (prefill) followed by the decoded
tokens' (t = h = w = c + delta_r). Integers, certified against the prompt extended by text tokens
up to the last cache position and laid out again by oracle.rope_index_exact (a generated token
is a text token after the prompt: the delta formula is not used to certify).

Rows of a batch have the same length, one of them text only (delta 0) and one with an image of
at least 2 x 2 tokens (delta < 0: a 1 x w image has delta 0), and the image changes rows from one
generation to the next, so that every row's delta changes: decoding with the previous prompt's
deltas, with none, or with row 0's for every row each shows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reference.golden.catalog import GroupSpec, TestGroupSpec, TestSpec
from reference.mrope import oracle
from reference.mrope.decode import generation

PROTOCOL = "mrope.decode"
GENERATIONS = (1, 2)
ARRAYS = {**{f"{role}_{g}": "int64" for g in GENERATIONS for role in ("token_types", "grids", "cache_positions")},
          **{f"expected_{g}": "int64" for g in GENERATIONS}}
INPUTS = tuple(f"{role}_{g}" for g in GENERATIONS for role in ("token_types", "grids", "cache_positions"))
QWEN2_VL = "https://github.com/huggingface/transformers/blob/main/src/transformers/models/qwen2_vl/modeling_qwen2_vl.py"
HF_43952 = "https://github.com/huggingface/transformers/pull/43952"
HF_36013 = "https://github.com/huggingface/transformers/pull/36013"
MLX_1143 = "https://github.com/Blaizzy/mlx-vlm/pull/1143"

NOTES = {
    "DecodeDeltas": {"bugType": "FUNCTIONALITY", "description": "Decode after a multimodal prompt: the token at "
                     "cache position c of row r is at t = h = w = c + delta_r, delta_r = max of the prompt's 3-D "
                     "positions in row r + 1 - prompt length (get_rope_index's mrope_position_deltas). A text-only "
                     "port (t = c) or one delta for the whole batch fails.", "links": [QWEN2_VL]},
    "TwoGenerations": {"bugType": "EDGE_CASE", "description": "A second generation on the same instance with a "
                       "different prompt: its deltas come from its own prompt. transformers reused the previous "
                       "call's rope_deltas (PR 36013 for forward, PR 43952 for generate); mlx-vlm decoded one "
                       "request with another's (PR 1143).", "links": [HF_36013, HF_43952, MLX_1143]},
}


@dataclass(frozen=True)
class DecodeTest(TestSpec):
    # per generation: (token_types rows, grids, cache positions)
    generations: tuple = ()


def image_row(before: int, grid: tuple, after: int) -> tuple:
    """Token types of text, <|vision_start|>, an image of grid (t, h, w), <|vision_end|>, text."""
    t, h, w = grid
    return (0,) * before + (0,) + (1,) * (t * h * w) + (0,) + (0,) * after


def _gen(rows, grids, steps) -> tuple:
    length = len(rows[0])
    return tuple(tuple(r) for r in rows), tuple(tuple(g) for g in grids), tuple(range(length, length + steps))


def _text(n) -> tuple:
    return (0,) * n


def tests() -> tuple:
    first = image_row(1, (1, 2, 3), 2)  # 11 tokens, delta -3
    second = image_row(0, (1, 3, 4), 3)  # 17 tokens, delta -8
    big = image_row(0, (1, 4, 4), 2)  # 20 tokens, delta -12
    wide = image_row(2, (1, 2, 4), 8)  # 20 tokens, delta -4
    return (
        DecodeTest("image-then-image", "Generation 1: row 0 text only, row 1 text and a 2 x 3 image (delta -3), "
                   "3 steps; generation 2: row 0 a 3 x 4 image (delta -8), row 1 text only, 2 steps.",
                   ("DecodeDeltas", "TwoGenerations", "ImageBlock", "TextOnly"),
                   (_gen((_text(len(first)), first), ((1, 2, 3),), 3), _gen((second, _text(len(second))),
                                                                          ((1, 3, 4),), 2))),
        DecodeTest("image-then-text", "Generation 1: a 4 x 4 image in row 0 (delta -12) and a 2 x 4 image in "
                   "row 1 (delta -4), 3 steps; generation 2: a text-only prompt (deltas 0), 3 steps.",
                   ("DecodeDeltas", "TwoGenerations", "ImageBlock", "TextOnly"),
                   (_gen((big, wide), ((1, 4, 4), (1, 2, 4)), 3), _gen((_text(10), _text(10)), (), 3))),
        DecodeTest("one-row", "One row: a 2 x 2 image (delta -2), 2 steps, then a 3 x 3 image (delta -6), 2 steps "
                   "(for sessions that refuse batches).", ("DecodeDeltas", "TwoGenerations", "ImageBlock"),
                   (_gen((image_row(1, (1, 2, 2), 1),), ((1, 2, 2),), 2),
                    _gen((image_row(2, (1, 3, 3), 0),), ((1, 3, 3),), 2))),
    )


def params() -> dict:
    from reference.mrope.vectors import MODELS

    return dict(MODELS["qwen2-vl"][0])


def groups() -> list[GroupSpec]:
    return [GroupSpec(PROTOCOL, "two-generations", "M-RoPE decode over two generations on one session: "
                      "prefill's 3-D positions, then t = h = w = cache_position + the prompt's delta per row.",
                      (TestGroupSpec(params(), tests(), QWEN2_VL),))]


FRESH_IMAGES = 3  # images in a drawn image row: its grids never have the shape of a committed one
FRESH_LENGTHS = (21, 40)  # drawn prompt lengths: past every committed prompt (<= 20 tokens)


def _drawn_image_row(draw):
    """(token types, grids) of a drawn image row: FRESH_IMAGES images of h x w in [2, 3], each
    between vision markers with 0 to 2 text tokens before it, then text up to a drawn length in
    FRESH_LENGTHS. A fresh input then never equals a committed one (prompt, grids or cache
    positions)."""
    row, grids = [], []
    for _ in range(FRESH_IMAGES):
        grid = (1, draw.integer(2, 3), draw.integer(2, 3))
        grids.append(grid)
        row += image_row(draw.integer(0, 2), grid, 0)
    length = draw.integer(max(FRESH_LENGTHS[0], len(row)), FRESH_LENGTHS[1])
    return tuple(row) + _text(length - len(row)), grids


def fresh(draw) -> list:
    """One two-generation script drawn at run time: two rows, the images in a drawn row in
    generation 1 and in the other row in generation 2 (every row's delta changes), 2 or 3 steps."""
    gens, image_at = [], draw.integer(0, 1)
    for _ in GENERATIONS:
        row, grids = _drawn_image_row(draw)
        rows = [None, None]
        rows[image_at], rows[1 - image_at] = row, _text(len(row))
        gens.append(_gen(rows, grids, draw.integer(2, 3)))
        image_at = 1 - image_at
    test = DecodeTest("drawn", f"Drawn at run time: two generations of two rows, {FRESH_IMAGES} images (h, w in "
                      "2..3) in one row, changing rows between generations.", ("DecodeDeltas", "TwoGenerations"),
                      tuple(gens))
    return [TestGroupSpec(params(), (test,), QWEN2_VL)]


def build(case_id, params, test):
    inputs = {}
    for g, (rows, grids, steps) in zip(GENERATIONS, test.generations):
        inputs[f"token_types_{g}"] = np.array(rows, dtype=np.int64)
        inputs[f"grids_{g}"] = np.array(grids, dtype=np.int64).reshape(-1, 3)
        inputs[f"cache_positions_{g}"] = np.array(steps, dtype=np.int64)
    return {}, inputs


def script(inputs) -> list:
    """[(token_types, grids, cache_positions)] per generation, from a case's arrays."""
    return [(np.asarray(inputs[f"token_types_{g}"]), np.asarray(inputs[f"grids_{g}"]).reshape(-1, 3),
             np.asarray(inputs[f"cache_positions_{g}"]).reshape(-1)) for g in GENERATIONS]


def compute(params, inputs, backend):
    return {f"expected_{g}": generation(*gen) for g, gen in zip(GENERATIONS, script(inputs))}


def shapes(params, arrays):
    out = {}
    for g in GENERATIONS:
        types, steps = arrays[f"token_types_{g}"], arrays[f"cache_positions_{g}"]
        if types.ndim != 2:
            return {f"token_types_{g}": ("batch", "seq")}
        out[f"expected_{g}"] = (3, types.shape[0], types.shape[1] + steps.size)
    return out


def exact(params, inputs):
    """The prompt followed by text tokens up to the last cache position, laid out by the oracle's
    own get_rope_index; the prompt's columns and the cache positions' columns kept."""
    out = {}
    for g, (types, grids, steps) in zip(GENERATIONS, script(inputs)):
        b, s = types.shape
        total = int(steps.max()) + 1 if steps.size else s
        extended = np.concatenate([types, np.zeros((b, total - s), dtype=types.dtype)], axis=1)
        full = oracle.rope_index_exact(extended, grids)
        out[f"expected_{g}"] = full[:, :, list(range(s)) + [int(c) for c in steps]]
    return out
