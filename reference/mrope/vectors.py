"""M-RoPE golden vectors: protocols ``mrope.apply`` (one group per model configuration of MODELS:
Qwen2-VL, Qwen3-VL, GLM-4V with interleaved pairs over half its head, Qwen3.5 with a quarter of its
head rotated), ``mrope.positions`` (get_rope_index's rule) and ``mrope.decode`` (decode_vectors.py:
two generations on one session).

Arrays: ``x`` [b, s, h, head_dim] (seeded, exactly representable in bfloat16 and float16),
``positions`` int64 [3, b, s] (t, h, w), ``expected`` [b, s, h, head_dim], every value correctly
rounded (reference.mrope.apply, golden) and certified against oracle.py. Parameters: head_dim,
rotary_dim, base, layout, mrope_section, variant.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reference import mrope
from reference.golden import shapes as serving
from reference.golden.catalog import GroupSpec, TestGroupSpec, TestSpec, VectorProtocol
from reference.golden.inputs import representable_inputs
from reference.mrope import decode_vectors, oracle
from reference.mrope.positions import rope_index

PROTOCOL = "mrope.apply"
POSITIONS = "mrope.positions"
QWEN2_VL = "https://github.com/huggingface/transformers/blob/main/src/transformers/models/qwen2_vl/modeling_qwen2_vl.py"
QWEN3_VL = "https://github.com/huggingface/transformers/blob/main/src/transformers/models/qwen3_vl/modeling_qwen3_vl.py"
GLM4V = "https://github.com/huggingface/transformers/blob/main/src/transformers/models/glm4v/modeling_glm4v.py"
QWEN3_5 = "https://github.com/huggingface/transformers/blob/main/src/transformers/models/qwen3_5/modeling_qwen3_5.py"
VLLM_MROPE = "https://github.com/vllm-project/vllm/blob/main/vllm/model_executor/layers/rotary_embedding/mrope.py"

NOTES = {
    "Qwen2VL": {"bugType": "BASIC", "description": "Qwen2-VL: head 128, rope_theta 1e6, mrope_section [16, 24, 24] "
                "slicing one ladder (pairs 0-15 t, 16-39 h, 40-63 w), rotate_half.", "links": [QWEN2_VL]},
    "Qwen3VL": {"bugType": "BASIC", "description": "Qwen3-VL: head 128, rope_theta 5e6, mrope_section [24, 20, 20] "
                "interleaved (pair i reads h for i % 3 == 1, w for i % 3 == 2, t otherwise, within the "
                "sections), rotate_half.", "links": [QWEN3_VL]},
    "Glm4V": {"bugType": "EDGE_CASE", "description": "GLM-4V (GLM-4.1V-9B): head 128, partial_rotary_factor 0.5 "
              "(rotary_dim 64, dims 64-127 pass through), mrope_section [8, 12, 12] sliced consecutively as "
              "Qwen2-VL's, rope_theta 1e4, and interleaved pairs (2i, 2i + 1) (rotate_half_llm). A kernel "
              "hard-coded to NEOX pairs (j, j + r/2) (vLLM's Triton M-RoPE kernel) or one that rotates the "
              "whole head fails.", "links": [GLM4V, VLLM_MROPE]},
    "Qwen35": {"bugType": "EDGE_CASE", "description": "Qwen3.5 / Qwen3-Next text: head 256, partial_rotary_factor "
               "0.25 (rotary_dim 64, dims 64-255 pass through), mrope_section [11, 11, 10] interleaved as "
               "Qwen3-VL's (h reaches pair 31, the last), rope_theta 1e7, rotate_half over the 64 rotated dims. "
               "Code that ignores partial_rotary_factor (MaxText) rotates the whole head and fails.",
               "links": [QWEN3_5]},
    "TextOnly": {"bugType": "BASIC", "description": "Text tokens: t = h = w, where M-RoPE is 1-D RoPE.",
                 "links": [QWEN2_VL]},
    "ImageBlock": {"bugType": "FUNCTIONALITY", "description": "Text, then an image block whose tokens have "
                   "t = start, h = start + row, w = start + column, then text resuming at max + 1 (the "
                   "get_rope_index rule).", "links": [QWEN2_VL]},
    "ShapeMatrix": {"bugType": "FUNCTIONALITY", "description": "A case of the serving shape matrix (fresh only): "
                    "batched decode, tile-boundary lengths and head counts, at head 16 with the models' "
                    "section patterns scaled down (qwen2 [2, 3, 3], qwen3 [4, 2, 2]). `--shapes full` grades "
                    "the whole matrix, a default run a few cheap cases.", "links": [QWEN2_VL, QWEN3_VL]},
    "BatchedDecode": {"bugType": "FUNCTIONALITY", "description": "Continuous-batching decode: several rows of "
                      "one token each, every row at its own (t, h, w), with t, h and w different from each "
                      "other (0 and 131071 among them). Code that takes the positions of row 0 for every "
                      "row, or rotates only row 0, passes every batch-1 case.", "links": [QWEN2_VL]},
    "TileBoundary": {"bugType": "EDGE_CASE", "description": "A sequence length at, just below or just above a "
                     "power-of-two tile (1 to 1000 tokens), text and an image block: a kernel that leaves a "
                     "partial tile unrotated fails.", "links": [QWEN2_VL]},
    **decode_vectors.NOTES,
    "HeadCount": {"bugType": "EDGE_CASE", "description": "A head count of real models (1 to 64), never equal to "
                  "the batch or sequence size, so that code confusing two axes cannot pass by coincidence.",
                  "links": [QWEN2_VL]},
}


@dataclass(frozen=True)
class MropeTest(TestSpec):
    positions: tuple = ()  # (t rows, h rows, w rows)
    heads: int = 2


def mrope_params(section, variant, base, head_dim=128, rotary_dim=128, layout="half") -> dict:
    return {"head_dim": int(head_dim), "rotary_dim": int(rotary_dim), "base": float(base), "layout": layout,
            "mrope_section": list(section), "variant": variant}


# The models' M-RoPE configurations: name -> (params, flag, source). Qwen2-VL and Qwen3-VL rotate
# the whole head in the half layout; GLM-4V pairs (2i, 2i + 1) over half the head; Qwen3.5 rotates
# a quarter of its 256-wide head (issue 23: the kernels that hard-coded NEOX pairs or ignored
# partial_rotary_factor passed every Qwen case).
MODELS = {
    "qwen2-vl": (mrope_params([16, 24, 24], "qwen2", 1e6), "Qwen2VL", QWEN2_VL),
    "qwen3-vl": (mrope_params([24, 20, 20], "qwen3", 5e6), "Qwen3VL", QWEN3_VL),
    "glm-4v": (mrope_params([8, 12, 12], "qwen2", 1e4, rotary_dim=64, layout="interleaved"), "Glm4V", GLM4V),
    "qwen3.5": (mrope_params([11, 11, 10], "qwen3", 1e7, head_dim=256, rotary_dim=64), "Qwen35", QWEN3_5),
}


def image_block(text_before=3, rows=2, cols=3, text_after=2):
    """(t, h, w) of text, an image of rows x cols tokens, text: get_rope_index's rule."""
    t, h, w = list(range(text_before)), list(range(text_before)), list(range(text_before))
    start = text_before
    for r in range(rows):
        for c in range(cols):
            t.append(start)
            h.append(start + r)
            w.append(start + c)
    nxt = max(max(t), max(h), max(w)) + 1
    for j in range(text_after):
        t.append(nxt + j)
        h.append(nxt + j)
        w.append(nxt + j)
    return (tuple(t),), (tuple(h),), (tuple(w),)


def _t(name, comment, flags, streams3):
    return MropeTest(name, comment, tuple(flags), tuple(streams3))


def _group(name):
    params, flag, source = MODELS[name]
    text = tuple(tuple(range(8)) for _ in range(1))
    return GroupSpec(PROTOCOL, name, NOTES[flag]["description"], (TestGroupSpec(params, (
        _t("text-8", "Eight text tokens at 0..7 (t = h = w).", (flag, "TextOnly"), (text, text, text)),
        _t("image-2x3", "3 text tokens, a 2 x 3 image block at t = 3, h = 3..4, w = 3..5, then text at 6, 7.",
           (flag, "ImageBlock"), image_block()),
        _t("image-late", "The same block after 4090 text tokens: large positions in every stream.",
           (flag, "ImageBlock"), tuple(tuple(tuple(v + 4087 for v in row) for row in s) for s in image_block())),
    ), source),))


def groups() -> list[GroupSpec]:
    return [_group(name) for name in MODELS] + positions_groups() + decode_vectors.groups()


def _drawn_cases(draw) -> list:
    """One drawn case per model configuration (MODELS, every seed: the layouts and partial rotary
    of GLM-4V and Qwen3.5 are never left to the seed), named after the model, at its own base."""
    out = []
    for name, (params, _, source) in MODELS.items():
        start = draw.integer(0, 20000)
        t, h, w = image_block(draw.integer(0, 4), draw.integer(1, 3), draw.integer(1, 3), draw.integer(0, 3))
        shift = tuple(tuple(tuple(v + start for v in row) for row in s) for s in (t, h, w))
        out.append(TestGroupSpec(params, (_t(f"drawn-{name}", f"Drawn at run time ({name}'s configuration): an "
                                             f"image block after {start} positions.", (), shift),), source))
    return out


# The serving shape matrix (issue 14), as rope.apply's (reference/rope/vectors/fresh.py): batched decode,
# tile-boundary lengths and head counts, every position drawn from the run's seed. Sizes: the
# golden reference settles every output in mpmath (about 60 us each), so the matrix keeps the
# shapes and drops the bulk: head 16 with the models' section patterns scaled down (qwen2's
# consecutive [2, 3, 3], qwen3's interleaved [4, 2, 2]), one row per prefill, one head past 100
# tokens, two tokens per head count: about 45 000 outputs, 3 s.
SHAPE_CONFIGS = {"qwen2": ([2, 3, 3], 1e6), "qwen3": ([4, 2, 2], 5e6)}
SAMPLE_KINDS = ("decode", "seq", "heads")
SAMPLE_MAX_TOKEN_HEADS = 400  # the default sample draws among cases of at most this many (token, head)s


def _shape_params(variant) -> dict:
    section, base = SHAPE_CONFIGS[variant]
    return {**mrope_params(section, variant, base), "head_dim": 16, "rotary_dim": 16}


def _shape_case(kind, name, comment, flags, streams3, heads, variant):
    test = MropeTest(f"shape-{name}-{variant}", f"Drawn at run time ({variant}'s section pattern at head 16): "
                     f"{comment}", tuple(flags) + ("ShapeMatrix",), tuple(streams3), heads)
    return kind, TestGroupSpec(_shape_params(variant), (test,), QWEN2_VL if variant == "qwen2" else QWEN3_VL)


def _thw_tokens(draw, count, far, fixed_text=None):
    """``count`` tokens of distinct t, each with h = t + dr and w = h + dc (dr, dc in [1, 64]) so
    that every stream differs; token 1 has w = far, token ``fixed_text`` is text at (0, 0, 0)."""
    ts = serving.distinct_rows(draw, count, 1, far - 129, {} if fixed_text is None else {fixed_text: 0})
    out = []
    for k, t in enumerate(ts):
        dr, dc = draw.integer(1, 64), draw.integer(1, 64)
        if k == fixed_text:
            out.append((0, 0, 0))
        elif k == 1:
            out.append((far - dr - dc, far - dc, far))
        else:
            out.append((t, t + dr, t + dr + dc))
    return out


def _tile_row(draw, n, far):
    """(t, h, w) rows of one sequence of n tokens: text, an image block of rows x cols patches and
    text again (get_rope_index's rule, image_block), from a drawn start."""
    before = draw.integer(0, min(3, n - 1))
    cols = draw.integer(1, min(n - before, 16))
    rows = (n - before) // cols
    streams = image_block(before, rows, cols, n - before - rows * cols)
    start = draw.integer(0, far - 2 * n)
    return tuple(tuple(tuple(v + start for v in row) for row in s) for s in streams), (before, rows, cols, start)


def shape_matrix(draw) -> list:
    """[(kind, TestGroupSpec)] of the whole matrix (serving.matrix): batched decode in both
    variants, the tile lengths and head counts alternating between them."""
    far = serving.FAR_POSITION

    def decode(variant, b):
        toks = _thw_tokens(draw, b, far, b - 1 if b > 2 else None)
        streams3 = tuple(tuple((tok[k],) for tok in toks) for k in range(3))
        return _shape_case("decode", f"decode-b{b}", f"{b} rows of one token each, each at its own "
                           f"(t, h, w) ({toks[:2]}...; w = {far} in row 1).", ("BatchedDecode", "ImageBlock"),
                           streams3, serving.heads_unlike(b, 1), variant)

    def seq(variant, n):
        streams3, (before, rows, cols, start) = _tile_row(draw, n, far)
        heads = serving.seq_heads(n)
        return _shape_case("seq", f"seq-{n}", f"{n} tokens: {before} text, a {rows} x {cols} image block and "
                           f"text, from position {start}; {heads} head(s).", ("TileBoundary", "ImageBlock"),
                           streams3, heads, variant)

    def heads(variant, h):
        toks = _thw_tokens(draw, 2, far)
        streams3 = tuple((tuple(tok[j] for tok in toks),) for j in range(3))
        return _shape_case("heads", f"heads-{h}", f"{h} heads, 2 tokens at drawn (t, h, w) {toks}.",
                           ("HeadCount",), streams3, h, variant)

    return serving.matrix(("qwen2", "qwen3"), decode, seq, heads)


def _stream_rows(test):
    """A test's rows of tokens: those of its first stream (t)."""
    return test.positions[0]


def _token_heads(tg) -> int:
    return serving.token_heads(tg, _stream_rows)


# mrope.apply's fresh cases: one drawn case, then the shape matrix: all of it when ``shapes`` is
# "full", else one cheap case of each kind of SAMPLE_KINDS (drawn).
fresh_groups = serving.fresh_cases(_drawn_cases, shape_matrix, SAMPLE_KINDS, SAMPLE_MAX_TOKEN_HEADS, _stream_rows)


@dataclass(frozen=True)
class IndexTest(TestSpec):
    token_types: tuple = ()  # per row: 0 text, 1 image token
    grids: tuple = ()  # (t, h, w) per image block, in order


def positions_groups() -> list[GroupSpec]:
    text_image_text = (0, 0, 0) + (1,) * 6 + (0, 0)
    two_images = (0,) + (1,) * 4 + (0, 0) + (1,) * 6 + (0,)
    return [GroupSpec(POSITIONS, "get-rope-index", "Qwen2-VL's get_rope_index rule for images.", (TestGroupSpec(
        {"head_dim": 128, "rotary_dim": 128, "base": 1e6, "layout": "half", "mrope_section": [16, 24, 24],
         "variant": "qwen2"}, (
            IndexTest("text-image-text", "3 text tokens, a 2 x 3 image (t 3, h 3..4, w 3..5), text resuming at 6.",
                      ("Qwen2VL", "ImageBlock"), (text_image_text,), ((1, 2, 3),)),
            IndexTest("two-images", "Text, a 2 x 2 image, two text tokens, a 3 x 2 image, text: each block "
                      "starts at the running index, text resumes at the block's max + 1.", ("Qwen2VL", "ImageBlock"),
                      (two_images,), ((1, 2, 2), (1, 3, 2))),
            IndexTest("two-rows", "Two batch rows, the first text only, the second with a 1 x 4 image.",
                      ("Qwen2VL", "ImageBlock", "TextOnly"), ((0,) * 6, (0,) + (1,) * 4 + (0,)), ((1, 1, 4),)),
        ), QWEN2_VL),))]


def fresh_positions(draw) -> list:
    """One row drawn at run time as Qwen2-VL's processor lays it out: text, then one to three
    images, each wrapped in <|vision_start|> ... <|vision_end|> (two text tokens) with zero to
    three more text tokens after it. Two image blocks are therefore never adjacent (at least the
    end and start markers lie between): such a row is not what the model's tokenizer produces,
    and transformers' get_rope_index, which groups consecutive image tokens into one block,
    raises on it."""
    types, grids = [0] * draw.integer(0, 3), []
    for _ in range(draw.integer(1, 3)):
        grid = (1, draw.integer(1, 4), draw.integer(1, 4))
        grids.append(grid)
        types += [0] + [1] * (grid[1] * grid[2]) + [0] + [0] * draw.integer(0, 3)  # start, image, end, text
    test = IndexTest("drawn", f"Drawn at run time: {len(grids)} image block(s) {grids}, each between vision "
                     "start and end tokens, among text.", (), (tuple(types),), tuple(grids))
    return [TestGroupSpec(positions_groups()[0].test_groups[0].params, (test,))]


def build_positions(case_id, params, test):
    return {}, {"token_types": np.array(test.token_types, dtype=np.int64),
                "grids": np.array(test.grids, dtype=np.int64).reshape(-1, 3)}


def compute_positions(params, inputs, backend):
    return {"expected": rope_index(inputs["token_types"], inputs["grids"])}


def shapes_positions(params, arrays):
    types = arrays["token_types"]
    if types.ndim != 2:
        return {"token_types": ("batch", "seq")}
    return {"expected": (3,) + types.shape}


def exact_positions(params, inputs):
    return {"expected": oracle.rope_index_exact(inputs["token_types"], inputs["grids"])}


def build_apply(case_id, params, test):
    positions = np.array(test.positions, dtype=np.int64)
    _, b, s = positions.shape
    return {}, {"x": representable_inputs(case_id, (b, s, test.heads, params["head_dim"])), "positions": positions}


def _kwargs(params):
    return dict(mrope_section=params["mrope_section"], variant=params["variant"], rotary_dim=params["rotary_dim"],
                base=params["base"], layout=params["layout"])


def compute_apply(params, inputs, backend):
    return {"expected": mrope.apply(inputs["x"], inputs["positions"], backend=backend, mode="golden", **_kwargs(params))}


def shapes_apply(params, arrays):
    positions = arrays["positions"]
    if positions.ndim != 3 or positions.shape[0] != 3:
        return {"positions": (3, "batch", "seq")}
    shape = positions.shape[1:] + ((arrays["x"].shape[2] if arrays["x"].ndim == 4 else "heads"), params["head_dim"])
    return {"x": shape, "expected": shape}


def exact_apply(params, inputs):
    return {"expected": oracle.apply_exact(inputs["x"], inputs["positions"], params["rotary_dim"], params["base"],
                                           params["layout"], params["mrope_section"], params["variant"])}


PARAMS_SCHEMA = {
    "type": "object", "additionalProperties": False,
    "required": ["head_dim", "rotary_dim", "base", "layout", "mrope_section", "variant"],
    "properties": {
        "head_dim": {"type": "integer", "minimum": 2, "multipleOf": 2},
        "rotary_dim": {"type": "integer", "minimum": 2, "multipleOf": 2},
        "base": {"type": "number", "exclusiveMinimum": 0},
        "layout": {"enum": ["half", "interleaved"]},
        "mrope_section": {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 3, "maxItems": 3},
        "variant": {"enum": ["qwen2", "qwen3"]},
    },
}

PROTOCOLS = {
    PROTOCOL: VectorProtocol(PROTOCOL, {"x": "float64", "positions": "int64", "expected": "float64"},
                             ("x", "positions"), PARAMS_SCHEMA, build_apply, compute_apply, shapes_apply, exact_apply,
                             fresh=fresh_groups),
    POSITIONS: VectorProtocol(POSITIONS, {"token_types": "int64", "grids": "int64", "expected": "int64"},
                              ("token_types", "grids"), PARAMS_SCHEMA, build_positions, compute_positions,
                              shapes_positions, exact_positions, fresh=fresh_positions),
    decode_vectors.PROTOCOL: VectorProtocol(decode_vectors.PROTOCOL, decode_vectors.ARRAYS, decode_vectors.INPUTS,
                                            PARAMS_SCHEMA, decode_vectors.build, decode_vectors.compute,
                                            decode_vectors.shapes, decode_vectors.exact, fresh=decode_vectors.fresh),
}
