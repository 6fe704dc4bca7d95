"""RoPE golden vectors: the catalog (which cases exist, their parameters and why), the protocols'
arrays and parameter schema, how inputs are built and expected values computed and certified.

Read by the generic machinery in ``reference.golden`` (docs/design.md). A case id is
``<protocol>/<group>/<test>``; ids are part of the public contract (reviews cite them), so rename
nothing here without bumping the suite version. Sizes are kept small on purpose (2 to 4 heads, at
most 8 tokens per row, a few positions per long-context case): the conformance runner grades the
whole catalog in four dtypes in seconds, and vectors/ stays about a megabyte.

Every test carries a comment that says why it exists, and flags; ``NOTES`` explains each flag
(Wycheproof style: bugType, description, links).

Protocols and arrays (r = rotary_dim):

- ``rope.apply``        ``x`` [b, s, h, head_dim], ``positions`` int64 [b, s], ``expected``
                        [b, s, h, head_dim];
- ``rope.cache``        ``positions`` int64 [b, s], ``cos`` and ``sin`` [b, s, r/2] in pair order
                        (pair i turns by positions * theta_i, whatever the layout);
- ``rope.frequencies``  ``inv_freq`` [r/2] and ``attention_factor`` (0-d);
- ``rope.apply_qk``     ``q`` [b, s, h, head_dim], ``k`` [b, s, kv_heads, head_dim], ``positions``
                        int64 [b, s], ``q_expected`` and ``k_expected`` like q and k.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from reference.golden.catalog import GroupSpec, TestGroupSpec, TestSpec, VectorProtocol
from reference.golden.inputs import representable_inputs
from reference.golden.shapes import (DECODE_BATCHES, FAR_POSITION, HEAD_COUNTS, LONG_PREFILL, TAIL_LENGTHS,
                                     TILE_LENGTHS, decode_rows, heads_unlike, select)
from reference.rope import module_vectors

# --------------------------------------------------------------------------------------------
# Flags

ROFORMER = "https://arxiv.org/abs/2104.09864"
HF_LLAMA = "https://github.com/huggingface/transformers/blob/main/src/transformers/models/llama/modeling_llama.py"
HF_ROPE_UTILS = "https://github.com/huggingface/transformers/blob/main/src/transformers/modeling_rope_utils.py"
NEOX = "https://github.com/EleutherAI/gpt-neox/blob/main/megatron/model/positional_embeddings.py"
MESH_JAX = "https://github.com/kingoflolz/mesh-transformer-jax/blob/master/mesh_transformer/layers.py"
META_LLAMA = "https://github.com/meta-llama/llama-models/blob/main/models/llama3/model.py"
FP16 = "https://en.wikipedia.org/wiki/Half-precision_floating-point_format"
FP32 = "https://en.wikipedia.org/wiki/Single-precision_floating-point_format"

NOTES: dict[str, dict] = {
    "WorkedExample": {
        "bugType": "BASIC",
        "description": "A small example that can be checked by hand from the RoFormer formulas "
        "(eq. 15: pair i turns by m * theta_i, theta_i = base^(-2i/d)).",
        "links": [ROFORMER],
    },
    "SourceMisprint": {
        "bugType": "KNOWN_BUG",
        "description": "A secondary source prints wrong numbers for this example; the values here "
        "are recomputed from the formula (see the test's comment). Code tuned to the printed "
        "numbers fails this case.",
        "links": [ROFORMER],
    },
    "SinglePair": {
        "bugType": "EDGE_CASE",
        "description": "rotary_dim = 2: one pair, which the half and interleaved layouts both form "
        "from features (0, 1); the case does not tell the layouts apart.",
        "links": [ROFORMER],
    },
    "ModelConfig": {
        "bugType": "FUNCTIONALITY",
        "description": "Head size, rotary size, base and pair layout of a released model, so a "
        "port of that model is graded on its own configuration.",
        "links": [HF_ROPE_UTILS],
    },
    "HalfSplit": {
        "bugType": "FUNCTIONALITY",
        "description": "Half-split layout: pairs (j, j + r/2), rotate_half as in GPT-NeoX and "
        "Hugging Face Llama/Qwen. An interleaved implementation fails it.",
        "links": [NEOX, HF_LLAMA],
    },
    "Interleaved": {
        "bugType": "FUNCTIONALITY",
        "description": "Interleaved layout: pairs (2i, 2i + 1), rotate_every_two as in GPT-J and "
        "the complex form of Meta's Llama code. A half-split implementation fails it.",
        "links": [MESH_JAX, META_LLAMA, ROFORMER],
    },
    "PartialRotary": {
        "bugType": "FUNCTIONALITY",
        "description": "rotary_dim < head_dim: only the first rotary_dim features rotate (with "
        "theta_i = base^(-2i/rotary_dim)); the tail must pass through unchanged.",
        "links": [NEOX, MESH_JAX],
    },
    "UncommonHeadDim": {
        "bugType": "EDGE_CASE",
        "description": "Head size whose pair count is not a power of two (or is unusually large); "
        "catches kernels that assume 64 pairs or a power-of-two tile.",
        "links": [ROFORMER],
    },
    "Prefill": {
        "bugType": "BASIC",
        "description": "Prompt processing: positions 0, 1, ..., s-1. Position 0 is the identity.",
        "links": [ROFORMER],
    },
    "Decode": {
        "bugType": "FUNCTIONALITY",
        "description": "KV-cache decode step: one token at a large position. Catches code that "
        "uses arange(seq_len) instead of the given positions.",
        "links": [HF_LLAMA],
    },
    "LeftPadding": {
        "bugType": "FUNCTIONALITY",
        "description": "Left-padded batch with Hugging Face position ids (cumsum of the attention "
        "mask minus 1, padding filled with 1): rows start their real tokens at different "
        "offsets and padding repeats a position.",
        "links": [HF_LLAMA],
    },
    "RowOffsets": {
        "bugType": "FUNCTIONALITY",
        "description": "Each batch row has its own position offset (continuous batching, chunked "
        "prefill). Catches broadcasting one row's positions to the whole batch.",
        "links": [HF_LLAMA],
    },
    "RepeatedPositions": {
        "bugType": "EDGE_CASE",
        "description": "The same position appears several times in a row (padding, speculative or "
        "tree decoding); each token must get that position's rotation.",
        "links": [HF_LLAMA],
    },
    "Float16IntegerLimit": {
        "bugType": "EDGE_CASE",
        "description": "Positions around 2^11 = 2048, past which float16 cannot hold every "
        "integer: positions or angles kept in float16 collide here.",
        "links": [FP16],
    },
    "Float16Overflow": {
        "bugType": "EDGE_CASE",
        "description": "Positions at and past 65504, the largest finite float16: positions cast "
        "to float16 become inf (or 65504) here.",
        "links": [FP16],
    },
    "Float32IntegerLimit": {
        "bugType": "EDGE_CASE",
        "description": "Positions around 2^24, past which float32 cannot hold every integer. "
        "float32 angle rounding exceeds a radian here, so the standard profile's budget is wide; "
        "the strict profile still discriminates.",
        "links": [FP32],
    },
    "LongContext": {
        "bugType": "FUNCTIONALITY",
        "description": "Positions of 2^17 and beyond (long-context models): the angle m * theta "
        "is large and its float32 rounding grows with m.",
        "links": [HF_ROPE_UTILS],
    },
    "Scaling": {
        "bugType": "FUNCTIONALITY",
        "description": "A long-context scaling type (HF rope_parameters form in the case's "
        "'scaling'): the frequencies theta'_i and the attention factor, a multiplier on cos and sin "
        "(HF's cos = emb.cos() * attention_scaling), come from reference/rope/scaling/.",
        "links": [HF_ROPE_UTILS],
    },
    "SeqLenDependent": {
        "bugType": "EDGE_CASE",
        "description": "The scaling depends on the current sequence length (seq_len): dynamic NTK, "
        "the length rule and LongRoPE's short/long choice. Cases sit below, at and above the "
        "original length; code that fixes the scale at init, or never resets it, fails some of them.",
        "links": [HF_ROPE_UTILS],
    },
    "AttentionFactor": {
        "bugType": "FUNCTIONALITY",
        "description": "An attention factor other than 1 multiplies cos and sin (YaRN 0.1 ln s + 1, "
        "LongRoPE sqrt(1 + ln s / ln L)): a missing factor, or one applied twice or to the softmax "
        "as well, fails here.",
        "links": [HF_ROPE_UTILS],
    },
    "ExplicitAttentionFactor": {
        "bugType": "KNOWN_BUG",
        "description": "The YaRN attention factor is set by the configuration, not YaRN's default "
        "0.1 ln s + 1: an explicit attention_factor (the final value; Laguna-XS.2 sets 1.0 at factor "
        "64, which vLLM ignored and SGLang squared), or mscale / mscale_all_dim (DeepSeek-V2: "
        "0.707 / 0.707 gives 1; HF falls back to the default when either is 0).",
        "links": [HF_ROPE_UTILS, "https://github.com/vllm-project/vllm/pull/48351",
                  "https://github.com/sgl-project/sglang/pull/33558"],
    },
    "PartialRotaryScaling": {
        "bugType": "KNOWN_BUG",
        "description": "A scaling type with rotary_dim < head_dim: the scaled frequencies are those "
        "of rotary_dim (HF: head_dim * partial_rotary_factor), and only the first rotary_dim features "
        "turn. Megatron's YaRN ignored rotary_percent.",
        "links": [HF_ROPE_UTILS],
    },
    "ShapeMatrix": {
        "bugType": "FUNCTIONALITY",
        "description": "A case of the serving shape matrix (fresh only): the shapes and call patterns "
        "of real serving, where kernels take other code paths than for the small catalog shapes. "
        "`--shapes full` grades the whole matrix, a default run one case of each kind.",
        "links": [HF_LLAMA],
    },
    "BatchedDecode": {
        "bugType": "FUNCTIONALITY",
        "description": "Continuous-batching decode: several rows of one token each, every row at its "
        "own position (0 and 131071 among them). A fused kernel that rotates only batch row 0 "
        "there passes every batch-1 decode case.",
        "links": [HF_LLAMA],
    },
    "TileBoundary": {
        "bugType": "EDGE_CASE",
        "description": "A sequence length at, just below or just above a power-of-two tile (1, 3, "
        "63, 64, 65, 113, 127, 128, 129, 257, 1000): a kernel that leaves the last partial tile "
        "unrotated, or reads past it, fails here. Every run grades 65, 129 and 257 (one token past "
        "a tile of 64, 128, 256), whatever its seed.",
        "links": [ROFORMER],
    },
    "HeadCount": {
        "bugType": "EDGE_CASE",
        "description": "A head count of real models (1 to 64), never equal to the batch or sequence "
        "size, so that code confusing two axes cannot pass by coincidence.",
        "links": [HF_LLAMA],
    },
    "LongPrefill": {
        "bugType": "FUNCTIONALITY",
        "description": "A prefill of 8192 tokens in one call.",
        "links": [HF_LLAMA],
    },
    "TensorLayout": {
        "bugType": "FUNCTIONALITY",
        "description": "x handed over as [b, h, s, d] (bhsd, HF attention's layout) or token-flattened "
        "[total_tokens, h, d] (thd) instead of [b, s, h, d] (spec.tensor_layout). An adapter that "
        "does not accept the layout raises Unsupported: the case is skipped, not failed.",
        "links": [HF_LLAMA],
    },
    "Varlen": {
        "bugType": "FUNCTIONALITY",
        "description": "Packed variable-length batch: sequences concatenated along the token axis with "
        "cu_seqlens their bounds, positions [total_tokens] restarting in every sequence.",
        "links": [HF_LLAMA],
    },
    "InPlace": {
        "bugType": "FUNCTIONALITY",
        "description": "spec.inplace: the adapter may write its result into x (in-place kernels); "
        "the runner grades the written x and gives every call a fresh copy.",
        "links": [HF_LLAMA],
    },
    "GroupedQuery": {
        "bugType": "FUNCTIONALITY",
        "description": "rope.apply_qk with fewer key heads than query heads (grouped-query or "
        "multi-query attention, down to one KV head): q and k turn by the same positions.",
        "links": [HF_LLAMA],
    },
    "FrequencyTable": {
        "bugType": "BASIC",
        "description": "The frequency ladder theta_i = base^(-2i/r), i = 0..r/2-1, and the "
        "attention factor (1 without scaling).",
        "links": [ROFORMER, HF_ROPE_UTILS],
    },
    **module_vectors.NOTES,  # rope.module's flags
}

# --------------------------------------------------------------------------------------------
# Catalog records


@dataclass(frozen=True)
class RopeTest(TestSpec):
    """One RoPE case. ``positions`` holds one tuple per batch row (int64 in the vectors)."""

    positions: tuple[tuple[int, ...], ...] = ()
    heads: int = 2
    x: tuple | None = None  # fixed input [b][s][h][d] instead of seeded random values
    seq_len: int | None = None  # default: max position + 1
    # How rope.apply hands the case to the adapter (conformance.rope.spec): "bshd", "bhsd" or
    # "thd" (token-flattened; the case's one row holds the packed sequences, cu_seqlens their
    # bounds). The stored arrays are always [b, s, h, d].
    tensor_layout: str = "bshd"
    cu_seqlens: tuple | None = None
    inplace: bool = False  # the adapter may write its result into x


def rope_params(head_dim, base=10000.0, layout="half", rotary_dim=None, scaling=None) -> dict:
    return {
        "head_dim": head_dim,
        "rotary_dim": head_dim if rotary_dim is None else rotary_dim,
        "base": float(base),
        "layout": layout,
        "scaling": scaling,
    }


# --------------------------------------------------------------------------------------------
# Position patterns (one function per pattern; each returns a RopeTest)

LAYOUT_FLAG = {"half": "HalfSplit", "interleaved": "Interleaved"}


def prefill(n=8, extra=""):
    return RopeTest(
        f"prefill-{n}",
        f"Prompt of {n} tokens at positions 0..{n - 1}; position 0 must be the identity.{extra}",
        ("Prefill",),
        (tuple(range(n)),),
    )


def decode(position, extra=""):
    return RopeTest(
        f"decode-{position}",
        f"One decode step with a KV cache: a single token at position {position}.{extra}",
        ("Decode",) + (("LongContext",) if position >= 2**17 else ()),
        ((position,),),
        heads=4,
    )


def _hf_left_padded(length, pads):
    # transformers: position_ids = attention_mask.cumsum(-1) - 1, then masked_fill(mask == 0, 1)
    return tuple(1 if j < pads else j - pads for j in range(length))


def left_padded():
    # Row 0 is not arange(seq): code that broadcasts row 0's positions to the batch and code that
    # ignores the positions (arange) then fail differently, and each gets its own diagnosis.
    rows = tuple(_hf_left_padded(6, p) for p in (2, 0, 4))
    return RopeTest(
        "left-padded",
        "Batch of 3 left-padded rows (2, 0 and 4 pad tokens) with Hugging Face position ids: "
        f"{[list(r) for r in rows]}. Real tokens start at different offsets; pads repeat position 1.",
        ("LeftPadding", "RepeatedPositions"),
        rows,
    )


def row_offsets(starts=(3, 100, 4093)):  # row 0 is not arange(seq), see left_padded
    rows = tuple(tuple(range(s, s + 4)) for s in starts)
    return RopeTest(
        "row-offsets",
        f"Three rows continuing from different cache lengths {list(starts)} (continuous batching): "
        "each row must use its own positions.",
        ("RowOffsets",),
        rows,
    )


def repeated():
    row = (0, 3, 3, 3, 9, 9)
    return RopeTest(
        "repeated",
        f"Positions {list(row)}: a position repeated within a row must give each token the same "
        "rotation (no running counter).",
        ("RepeatedPositions",),
        (row,),
    )


def around(power):
    p = 2**power
    base_rows = [p - 2, p - 1, p, p + 1]
    flags = {11: ("Float16IntegerLimit",), 16: ("Float16Overflow",), 20: ("LongContext",),
             24: ("Float32IntegerLimit", "LongContext")}[power]
    why = {
        11: "float16 holds every integer only up to 2048; 2049 is the first it cannot.",
        16: "65504 is the largest finite float16 and 65520 already rounds to inf; float16 "
        "positions overflow here.",
        20: "a long-context position: rounding m * theta to float32 moves the angle by up to "
        "about 2^-24 * m * theta, a sixteenth of a radian for theta_0 = 1.",
        24: "float32 holds every integer only up to 2^24; 2^24 + 1 is the first it cannot. "
        "Angles need extended precision for the float64 reference to stay within 1-2 ulp.",
    }[power]
    if power == 16:
        base_rows = [65503, 65504, p - 1, p, p + 1]
    return RopeTest(
        f"around-2p{power}",
        f"Positions {base_rows} around 2^{power}: {why}",
        flags,
        (tuple(base_rows),),
    )


def _configured(tests, layout, *extra_flags):
    """The pattern tests with the configuration's flags appended."""
    return tuple(replace(t, flags=t.flags + extra_flags + (LAYOUT_FLAG[layout],)) for t in tests)


# --------------------------------------------------------------------------------------------
# Model configurations (head_dim, rotary_dim, base, layout) as published in their configs

MODELS = {
    "llama2-d128": dict(
        params=rope_params(128, 1e4, "half"),
        source="Llama-2-7B as in Hugging Face transformers: hidden 4096 / 32 heads, rope_theta "
        "10000, rotate_half layout (https://huggingface.co/meta-llama/Llama-2-7b-hf).",
        context=4096,
    ),
    "llama2-d128-meta": dict(
        params=rope_params(128, 1e4, "interleaved"),
        source="Llama-2-7B in Meta's reference code: the same frequencies applied to interleaved "
        "pairs through complex multiplication (freqs_cis).",
        context=4096,
    ),
    "llama3-d128": dict(
        params=rope_params(128, 5e5, "half"),
        source="Llama-3-8B: head 128, rope_theta 500000, rotate_half layout "
        "(https://huggingface.co/meta-llama/Meta-Llama-3-8B).",
        context=8192,
    ),
    "qwen2-d128": dict(
        params=rope_params(128, 1e6, "half"),
        source="Qwen2-7B: hidden 3584 / 28 heads = 128, rope_theta 1000000, rotate_half layout "
        "(https://huggingface.co/Qwen/Qwen2-7B).",
        context=32768,
    ),
    "codellama-d128-meta": dict(
        params=rope_params(128, 1e6, "interleaved"),
        source="Code Llama 7B in Meta's reference code (codellama/llama/model.py: freqs_cis, complex "
        "multiplication of interleaved pairs): head 128, rope_theta 1000000, 16384-token training "
        "context (https://huggingface.co/codellama/CodeLlama-7b-hf). An interleaved implementation "
        "that drops the base (torchtune's did) fails it.",
        context=16384,
    ),
    "gpt-neox-20b": dict(
        params=rope_params(96, 1e4, "half", rotary_dim=24),
        source="GPT-NeoX-20B: hidden 6144 / 64 heads = 96, rotary_pct 0.25 so rotary_dim 24, "
        "rotary_emb_base 10000, rotate_half layout (https://huggingface.co/EleutherAI/gpt-neox-20b).",
        context=2048,
    ),
    "gpt-j-6b": dict(
        params=rope_params(256, 1e4, "interleaved", rotary_dim=64),
        source="GPT-J-6B: n_embd 4096 / 16 heads = 256, rotary_dim 64, rotate_every_two "
        "(interleaved) layout (https://huggingface.co/EleutherAI/gpt-j-6b).",
        context=2048,
    ),
}


def _model_flags(name):
    params = MODELS[name]["params"]
    flags = ("ModelConfig",)
    if params["rotary_dim"] < params["head_dim"]:
        flags += ("PartialRotary",)
    return flags


def _model_group(protocol, name, tests):
    model = MODELS[name]
    layout = model["params"]["layout"]
    return GroupSpec(
        protocol,
        name,
        model["source"],
        (TestGroupSpec(model["params"], _configured(tests, layout, *_model_flags(name)),
                       model["source"]),),
    )


# --------------------------------------------------------------------------------------------
# Worked examples

_PAIR_TRUE = (2 * math.cos(1.0) - 3 * math.sin(1.0), 2 * math.sin(1.0) + 3 * math.cos(1.0))
PAIR_COMMENT = (
    "The pair [2, 3] rotated at m = 1 with d = 2 (theta_0 = 1): [2 cos 1 - 3 sin 1, "
    f"2 sin 1 + 3 cos 1] = [{_PAIR_TRUE[0]:.4f}, {_PAIR_TRUE[1]:.4f}]. The source document "
    "misprints this as [-1.6245, 3.0252] (an arithmetic error); the expected values here are "
    "the true ones."
)
D512_COMMENT = (
    "theta_i = 10000^(-2i/512) for d = 512: theta_1 = 10000^(-2/512) = 0.96466 and theta_255 "
    "= 10000^(-510/512) = 1.0366e-4. The source document misprints theta_255 as about 1.58e-5; "
    "the expected values here are the true ones."
)
D512_APPLY_COMMENT = (
    "d = 512 (256 pairs) at positions 0, 1, 2: the worked example's frequency ladder, "
    "theta_1 = 0.96466 and theta_255 = 1.0366e-4 (the source misprints theta_255 as 1.58e-5)."
)


def _pair_test(name, layout):
    # One pair (r = 2) is the same in both layouts, so neither layout flag applies: the two ids
    # exist so that an implementation fixed to either layout grades the example.
    return RopeTest(name, PAIR_COMMENT + f" Stored under spec.layout = {layout!r}; with a single pair both "
                    "layouts pair (x0, x1).", ("WorkedExample", "SourceMisprint", "SinglePair"),
                    ((1,),), heads=1, x=((((2.0, 3.0),),),))


WORKED_APPLY = GroupSpec(
    "rope.apply",
    "worked-example",
    "Hand-checkable examples from the RoFormer formulas, with the values the seed document "
    "misprints recomputed.",
    (
        TestGroupSpec(rope_params(2, 1e4, "half"), (_pair_test("pair-2-3-m1", "half"),)),
        TestGroupSpec(rope_params(2, 1e4, "interleaved"),
                      (_pair_test("pair-2-3-m1-interleaved", "interleaved"),)),
        TestGroupSpec(
            rope_params(512, 1e4, "half"),
            (RopeTest("d512", D512_APPLY_COMMENT, ("WorkedExample", "SourceMisprint", "HalfSplit"),
                      ((0, 1, 2),), heads=1),),
        ),
    ),
)

# --------------------------------------------------------------------------------------------
# rope.apply


def _apply_groups():
    groups = [WORKED_APPLY]
    groups.append(_model_group("rope.apply", "llama2-d128", (
        prefill(), decode(4095, " The last position of Llama-2's 4096-token context."),
        decode(8191, " Twice Llama-2's context: positions past training are still well defined."),
        left_padded(), row_offsets(), repeated(),
        around(11), around(16), around(20), around(24),
    )))
    groups.append(_model_group("rope.apply", "llama2-d128-meta", (
        prefill(), decode(4095), left_padded(), around(16), around(24),
    )))
    groups.append(_model_group("rope.apply", "llama3-d128", (
        prefill(), decode(8191, " The last position of Llama-3's 8192-token context."),
        decode(131071, " The last position of a 128K context (Llama-3.1 length)."),
        row_offsets(), around(20), around(24),
    )))
    groups.append(_model_group("rope.apply", "codellama-d128-meta", (
        prefill(), decode(16383, " The last position of Code Llama's 16384-token training context."),
        decode(100000, " Code Llama's extrapolation range (up to 100K tokens, the reason for base 1e6)."),
        left_padded(), around(16), around(20),
    )))
    groups.append(_model_group("rope.apply", "qwen2-d128", (
        prefill(), decode(131071, " The last position of a 128K context."),
        left_padded(), around(16), around(24),
    )))
    groups.append(_model_group("rope.apply", "gpt-neox-20b", (
        prefill(), decode(2047, " The last position of GPT-NeoX-20B's 2048-token context."),
        left_padded(), around(11), around(16), around(24),
    )))
    groups.append(_model_group("rope.apply", "gpt-j-6b", (
        prefill(), decode(2047, " The last position of GPT-J's 2048-token context."),
        row_offsets(), around(11), around(24),
    )))
    groups.append(_head_dims_group((prefill(), around(16))))
    return groups


HEAD_DIMS = {
    64: "head 64 (e.g. Llama-3.2-1B: hidden 2048 / 32 heads)",
    80: "head 80: 40 pairs, not a power of two",
    96: "head 96: 48 pairs, not a power of two (e.g. Phi-3-mini: hidden 3072 / 32 heads)",
    256: "head 256: 128 pairs (e.g. Gemma-7B)",
}
UNCOMMON_HEAD_DIMS = (80, 96, 256)  # flagged UncommonHeadDim


def _head_dims_group(tests):
    """rope.apply/head-dims: ``tests`` at every head size of HEAD_DIMS, in both layouts."""
    test_groups = []
    for d, why in HEAD_DIMS.items():
        for layout, layout_flag in LAYOUT_FLAG.items():
            flags = (layout_flag,) + (("UncommonHeadDim",) if d in UNCOMMON_HEAD_DIMS else ())
            configured = tuple(replace(t, name=f"d{d}-{layout}-{t.name}", flags=t.flags + flags,
                                       comment=f"{why}, {layout} layout, base 10000. {t.comment}")
                               for t in tests)
            test_groups.append(TestGroupSpec(rope_params(d, 1e4, layout), configured))
    return GroupSpec("rope.apply", "head-dims",
                     "Full rotary at the head sizes in common use, in both layouts.",
                     tuple(test_groups))


# --------------------------------------------------------------------------------------------
# rope.cache: cos and sin per pair, independent of layout


def _cache_groups():
    worked = GroupSpec(
        "rope.cache", "worked-example",
        "The cos/sin table of the worked example.",
        (TestGroupSpec(rope_params(2, 1e4, "half"), (RopeTest(
            "m1-d2", "d = 2 at m = 1: cos = cos 1 = 0.5403, sin = sin 1 = 0.8415 (the rotation "
            "behind the worked example [2, 3] -> [-1.4438, 3.3038]; the source misprints it).",
            ("WorkedExample", "SourceMisprint", "SinglePair"), ((0, 1),)),)),),
    )
    return [
        worked,
        _model_group("rope.cache", "llama2-d128", (prefill(), decode(4095), around(16), around(24))),
        _model_group("rope.cache", "llama3-d128", (decode(131071), around(20))),
        _model_group("rope.cache", "gpt-neox-20b", (prefill(), left_padded())),
        _model_group("rope.cache", "gpt-j-6b", (prefill(), around(11))),
    ]


# --------------------------------------------------------------------------------------------
# rope.frequencies


def _frequency_test(name, comment, flags, seq_len):
    return RopeTest(name, comment, ("FrequencyTable",) + flags, seq_len=seq_len)


def _frequency_groups():
    groups = [GroupSpec(
        "rope.frequencies", "worked-example", "The d = 512 frequency ladder of the worked example.",
        (TestGroupSpec(rope_params(512, 1e4, "half"), (_frequency_test(
            "d512-thetas", D512_COMMENT, ("WorkedExample", "SourceMisprint"), 512),)),),
    )]
    for name, model in MODELS.items():
        if name in ("llama2-d128-meta", "codellama-d128-meta"):
            continue  # same frequencies as llama2-d128 and qwen2-d128 (the pair layout does not matter)
        p = model["params"]
        comment = (f"inv_freq for rotary_dim {p['rotary_dim']}, base {p['base']:g}; "
                   "no scaling, so attention_factor is 1.")
        groups.append(GroupSpec("rope.frequencies", name, model["source"], (TestGroupSpec(
            p, (_frequency_test("inv-freq", comment, _model_flags(name), model["context"]),),
            model["source"]),)))
    test_groups = []
    for d, why in HEAD_DIMS.items():
        flags = ("UncommonHeadDim",) if d in UNCOMMON_HEAD_DIMS else ()
        test_groups.append(TestGroupSpec(rope_params(d, 1e4, "half"), (_frequency_test(
            f"d{d}", f"{why}: inv_freq for base 10000.", flags, 4096),)))
    groups.append(GroupSpec("rope.frequencies", "head-dims",
                            "Frequency ladders at the head sizes in common use.", tuple(test_groups)))
    return groups


# --------------------------------------------------------------------------------------------
# Fresh cases (reference.golden.fresh): drawn at run time, in no file


def _fresh_positions(draw, context):
    """[b][s] positions below a limit drawn from the model's context, 2^17 and 2^24."""
    limit = draw.choice((context, 2**17, 2**24))
    b, s = draw.integer(1, 3), draw.integer(1, 6)
    return tuple(tuple(draw.integers(0, limit - 1, s)) for _ in range(b)), limit


def _fresh_rotations(draw, protocol):
    """Two cases, each a model configuration (scaled ones included) at random positions."""
    groups = []
    for k in range(2):
        name = draw.choice(sorted(MODELS) + sorted(SCALED_MODELS))
        model = MODELS.get(name) or SCALED_MODELS[name]
        flags = _model_flags(name) if name in MODELS else _scaling_flags(name)
        positions, limit = _fresh_positions(draw, model.get("context", 131072))
        heads = draw.integer(1, 3) if protocol == "rope.apply" else 2
        test = RopeTest(f"{name}-{k}", f"Drawn at run time: {name}'s configuration at "
                        f"{len(positions)} x {len(positions[0])} positions below {limit}.",
                        flags + (LAYOUT_FLAG[model["params"]["layout"]],), positions, heads)
        groups.append(TestGroupSpec(model["params"], (test,), model["source"]))
    return groups


# The shape matrix of serving (rope.apply only): batched decode, tile-boundary lengths, head
# counts, partial rotary at every catalog head size, long prefill, the tensor layouts and
# in-place kernels. Everything is drawn from the run's seed; `--shapes full` grades all of it,
# a default run a sample (SAMPLE_KINDS: one case of each kind). The tensor-layout cases are in the
# full matrix only: an adapter written before spec.tensor_layout existed does not know to raise
# Unsupported for them, and a default run must keep grading it as before.
PARTIAL_HEAD_DIMS = (64, 80, 96, 128, 256)  # the catalog's head sizes; rotary_dim = head_dim / 4
SAMPLE_KINDS = ("decode", "seq", "heads", "dim", "inplace")
# Graded by every run, whatever the seed: the lengths just past a tile of 64, 128 and 256 in both
# layouts (kind "seq-tail"). A kernel that leaves its last partial tile unrotated fails them all.
ALWAYS_KINDS = ("seq-tail",)
SEQ_LENGTHS = tuple(sorted(set(TILE_LENGTHS) | set(TAIL_LENGTHS)))


def _shape_config(layout):
    name = "llama3-d128" if layout == "half" else "llama2-d128-meta"
    return name, MODELS[name]


def _shape_test(kind, name, comment, flags, positions, heads, layout, **extra):
    config, model = _shape_config(layout)
    flags = flags + (LAYOUT_FLAG[layout], "ShapeMatrix")
    test = RopeTest(f"shape-{name}-{layout}", f"Drawn at run time ({config}'s configuration): {comment}",
                    flags, positions, heads, **extra)
    return kind, TestGroupSpec(model["params"], (test,), model["source"])


def shape_matrix(draw) -> list:
    """[(kind, TestGroupSpec)] of the whole shape matrix, every position drawn from ``draw``."""
    out = []
    for layout in ("half", "interleaved"):
        for b in DECODE_BATCHES:
            # Row 0 is never position 0 (there a rotation is the identity); rows 1 and b-1 are
            # the farthest apart a 128K context allows.
            rows = decode_rows(draw, b, FAR_POSITION)
            out.append(_shape_test("decode", f"decode-b{b}", f"continuous-batching decode: {b} rows of one "
                                   f"token each, each row at its own position ({rows[:3]}...; 0 and {FAR_POSITION} "
                                   "included).", ("Decode", "RowOffsets", "LongContext", "BatchedDecode"),
                                   tuple((p,) for p in rows), heads_unlike(b, 1), layout))
        for n in SEQ_LENGTHS:
            starts = (draw.integer(0, 4096), draw.integer(0, FAR_POSITION - n))
            out.append(_shape_test("seq-tail" if n in TAIL_LENGTHS else "seq", f"seq-{n}", f"2 rows of {n} tokens from positions {list(starts)}: "
                                   "a length at or around a power-of-two tile.",
                                   ("Prefill", "RowOffsets", "TileBoundary"),
                                   tuple(tuple(range(s0, s0 + n)) for s0 in starts), heads_unlike(2, n), layout))
        for h in HEAD_COUNTS:
            rows = tuple(tuple(draw.integers(0, 65535, 5)) for _ in range(2))
            out.append(_shape_test("heads", f"heads-{h}", f"{h} heads, 2 rows of 5 tokens at drawn positions.",
                                   ("HeadCount",), rows, h, layout))
        for d in PARTIAL_HEAD_DIMS:
            r = d // 4
            rows = tuple(tuple(draw.integers(0, 32767, 4)) for _ in range(3))
            test = RopeTest(f"shape-dim-d{d}-r{r}-{layout}", f"Drawn at run time: head {d}, rotary_dim {r} "
                            f"(partial rotary, base 10000), 3 rows of 4 tokens, 8 heads.",
                            ("PartialRotary", "ShapeMatrix", LAYOUT_FLAG[layout]) + (
                                ("UncommonHeadDim",) if d in UNCOMMON_HEAD_DIMS else ()), rows, 8)
            out.append(("dim", TestGroupSpec(rope_params(d, 1e4, layout, rotary_dim=r), (test,))))
        start = draw.integer(0, 4096)
        out.append(_shape_test("long", f"prefill-{LONG_PREFILL}", f"a long prefill: {LONG_PREFILL} tokens from "
                               f"position {start}.", ("Prefill", "LongPrefill"),
                               (tuple(range(start, start + LONG_PREFILL)),), 3, layout))
        # Tensor layouts: the same kinds of batch in [b, h, s, d] and token-flattened form.
        rows = decode_rows(draw, 7, FAR_POSITION)
        out.append(_shape_test("tensor-layout", "bhsd-decode-b7", f"batched decode (7 rows, positions {rows[:3]}"
                               "...) handed over as x [b, h, s, d] (HF attention's layout).",
                               ("BatchedDecode", "TensorLayout"), tuple((p,) for p in rows), 3, layout,
                               tensor_layout="bhsd"))
        starts = (draw.integer(0, 4096), draw.integer(0, FAR_POSITION - 129))
        out.append(_shape_test("tensor-layout", "bhsd-seq-129", f"2 rows of 129 tokens from {list(starts)} as "
                               "x [b, h, s, d].", ("TileBoundary", "TensorLayout"),
                               tuple(tuple(range(s0, s0 + 129)) for s0 in starts), 3, layout, tensor_layout="bhsd"))
        lengths = (1, 63, 129, 5)
        offsets = [draw.integer(0, 8192) for _ in lengths]
        packed = tuple(p for n, o in zip(lengths, offsets) for p in range(o, o + n))
        bounds = tuple(int(c) for c in np.cumsum((0,) + lengths))
        out.append(_shape_test("tensor-layout", "thd-varlen", f"4 sequences of {list(lengths)} tokens packed "
                               f"into x [total_tokens, h, d] (cu_seqlens {list(bounds)}), each continuing from "
                               f"its own cache length {offsets}.", ("TensorLayout", "Varlen", "RowOffsets"),
                               (packed,), 3, layout, tensor_layout="thd", cu_seqlens=bounds))
        rows = decode_rows(draw, 7, FAR_POSITION)
        out.append(_shape_test("tensor-layout", "thd-decode-b7", "7 decode tokens of 7 sequences packed into "
                               "x [7, h, d] (cu_seqlens 0..7).", ("BatchedDecode", "TensorLayout", "Varlen"),
                               (tuple(rows),), 3, layout, tensor_layout="thd", cu_seqlens=tuple(range(8))))
        # In-place kernels: spec.inplace allows writing into x.
        rows = decode_rows(draw, 7, FAR_POSITION)
        out.append(_shape_test("inplace", "inplace-decode-b7", "batched decode with spec.inplace: the adapter "
                               "may write into x; the written x is graded.", ("BatchedDecode", "InPlace"),
                               tuple((p,) for p in rows), 3, layout, inplace=True))
        starts = (draw.integer(0, 4096), draw.integer(0, FAR_POSITION - 129))
        out.append(_shape_test("inplace", "inplace-seq-129", "2 rows of 129 tokens with spec.inplace.",
                               ("TileBoundary", "InPlace"), tuple(tuple(range(s0, s0 + 129)) for s0 in starts),
                               3, layout, inplace=True))
    return out


def fresh_apply(draw, shapes="sample"):
    """rope.apply's fresh cases: two drawn configurations, then the shape matrix: all of it when
    ``shapes`` is "full", else one case of each kind of SAMPLE_KINDS (drawn) and every case of
    ALWAYS_KINDS (the just-past-tile lengths)."""
    groups = _fresh_rotations(draw, "rope.apply")
    return groups + select(shape_matrix(draw), shapes, SAMPLE_KINDS, draw, always=ALWAYS_KINDS)


def fresh_frequencies(draw):
    """Two frequency ladders at a rotary_dim in [4, 256] and an integer base in [500, 10^7]."""
    groups = []
    for k in range(2):
        r, base = 2 * draw.integer(2, 128), draw.integer(500, 10**7)
        test = _frequency_test(f"r{r}-base{base}", f"Drawn at run time: inv_freq for rotary_dim {r}, "
                               f"base {base}.", (), draw.integer(1, 2**17))
        groups.append(TestGroupSpec(rope_params(r, base, "half"), (test,)))
    return groups


# --------------------------------------------------------------------------------------------
# Scaled RoPE (reference/rope/scaling/): real configurations, HF rope_parameters names

PHI3_LONG = (1.0299999713897705, 1.0499999523162842, 1.0499999523162842, 1.0799999237060547,
             1.2299998998641968, 1.2299998998641968, 1.2999999523162842, 1.4499999284744263,
             1.5999999046325684, 1.6499998569488525, 1.8999998569488525, 2.859999895095825,
             3.68999981880188, 5.419999599456787, 5.489999771118164, 5.489999771118164,
             9.09000015258789, 11.579999923706055, 15.65999984741211, 15.769999504089355,
             15.789999961853027, 18.360000610351562, 21.989999771118164, 23.079999923706055,
             30.009998321533203, 32.35000228881836, 32.590003967285156, 35.56000518798828,
             39.95000457763672, 53.840003967285156, 56.20000457763672, 57.95000457763672,
             59.29000473022461, 59.77000427246094, 59.920005798339844, 61.190006256103516,
             61.96000671386719, 62.50000762939453, 63.3700065612793, 63.48000717163086,
             63.48000717163086, 63.66000747680664, 63.850006103515625, 64.08000946044922,
             64.760009765625, 64.80001068115234, 64.81001281738281, 64.81001281738281)
PHI3_SHORT = (1.05, 1.05, 1.05, 1.1, 1.1, 1.1, 1.2500000000000002, 1.2500000000000002,
              1.4000000000000004, 1.4500000000000004, 1.5500000000000005, 1.8500000000000008,
              1.9000000000000008) + (2.000000000000001,) * 19 + (
              2.1000000000000005, 2.1000000000000005, 2.2, 2.3499999999999996, 2.3499999999999996,
              2.3499999999999996, 2.3499999999999996, 2.3999999999999995, 2.3999999999999995,
              2.6499999999999986, 2.6999999999999984, 2.8999999999999977, 2.9499999999999975,
              3.049999999999997, 3.049999999999997, 3.049999999999997)

SCALED_MODELS = {
    "llama3.1-d128": dict(
        params=rope_params(128, 5e5, "half", scaling={
            "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192}),
        source="Llama-3.1-8B: rope_theta 500000, rope_scaling llama3 (factor 8, low_freq_factor 1, "
        "high_freq_factor 4, original 8192) (https://huggingface.co/meta-llama/Llama-3.1-8B).",
        seq_lens=(None,)),
    "llama3.1-d128-meta": dict(
        params=rope_params(128, 5e5, "interleaved", scaling={
            "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192}),
        source="Llama-3.1-8B in Meta's own layout: llama-models' apply_scaling (factor 8, low_freq_factor "
        "1, high_freq_factor 4, original 8192) then freqs_cis, complex multiplication of interleaved "
        "pairs (https://github.com/meta-llama/llama-models/blob/main/models/llama3/model.py); torchtune's "
        "Llama3ScaledRoPE pairs the same way.",
        seq_lens=(None,), same_tables_as="llama3.1-d128"),
    "qwen2.5-yarn4": dict(
        params=rope_params(128, 1e6, "half", scaling={
            "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}),
        source="Qwen2.5-7B-Instruct with the YaRN setting its model card gives for 128K: factor 4, "
        "original 32768, rope_theta 1e6; attention factor 0.1 ln 4 + 1 (https://huggingface.co/Qwen/"
        "Qwen2.5-7B-Instruct).", seq_lens=(None,)),
    "deepseek-v3-yarn40": dict(
        params=rope_params(64, 1e4, "interleaved", scaling={
            "rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096,
            "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0}),
        source="DeepSeek-V3: qk_rope_head_dim 64, rope_theta 10000, rope_scaling yarn factor 40, "
        "original 4096, beta_fast 32, beta_slow 1, mscale = mscale_all_dim = 1 (so the cos/sin "
        "factor is 1; DeepSeek puts mscale**2 in the softmax scale) "
        "(https://huggingface.co/deepseek-ai/DeepSeek-V3).", seq_lens=(None,)),
    "deepseek-v2-yarn40": dict(
        params=rope_params(64, 1e4, "interleaved", scaling={
            "rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096,
            "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 0.707, "mscale_all_dim": 0.707}),
        source="DeepSeek-V2: qk_rope_head_dim 64, rope_theta 10000, rope_scaling yarn factor 40, "
        "original 4096, beta_fast 32, beta_slow 1, mscale = mscale_all_dim = 0.707: the cos/sin factor is "
        "get_mscale(40, 0.707) / get_mscale(40, 0.707) = 1, where code that ignores the two keys uses "
        "0.1 ln 40 + 1 = 1.369 (https://huggingface.co/deepseek-ai/DeepSeek-V2).", seq_lens=(None,)),
    "laguna-xs2-yarn64": dict(
        params=rope_params(128, 5e5, "half", rotary_dim=64, scaling={
            "rope_type": "yarn", "factor": 64.0, "original_max_position_embeddings": 4096,
            "beta_fast": 32.0, "beta_slow": 1.0, "attention_factor": 1.0}),
        source="poolside Laguna-XS.2, full-attention layers: head 128, partial_rotary_factor 0.5 so "
        "rotary_dim 64, rope_theta 500000, rotate_half layout, yarn factor 64, original 4096, explicit "
        "attention_factor 1.0 (vLLM ignored the key and used 0.1 ln 64 + 1 = 1.416) "
        "(https://huggingface.co/poolside/Laguna-XS.2).", seq_lens=(None,), decodes=(131071, 262143)),
    "laguna-xs2-yarn64-interleaved": dict(
        params=rope_params(128, 5e5, "interleaved", rotary_dim=64, scaling={
            "rope_type": "yarn", "factor": 64.0, "original_max_position_embeddings": 4096,
            "beta_fast": 32.0, "beta_slow": 1.0, "attention_factor": 1.0}),
        source="Laguna-XS.2's full-attention YaRN (rotary_dim 64 of head 128, base 500000, factor 64, "
        "original 4096, attention_factor 1.0) in the interleaved layout, as Megatron-Core's "
        "rotary_interleaved applies the same frequencies: YaRN with partial rotary in the other pair "
        "layout (Megatron's YaRN ignored rotary_percent).", seq_lens=(None,), same_tables_as="laguna-xs2-yarn64"),
    "qwen3.6-yarn4": dict(
        params=rope_params(256, 1e7, "half", rotary_dim=64, scaling={
            "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 262144,
            "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 0.0}),
        source="Qwen3.6's YaRN setting: head 256, partial_rotary_factor 0.25 so rotary_dim 64, "
        "rope_theta 1e7, factor 4 over original 262144, mscale 1 and mscale_all_dim 0: HF falls back "
        "to 0.1 ln 4 + 1 = 1.1386 since mscale_all_dim is 0 (transformers _compute_yarn_parameters: "
        "'if mscale and mscale_all_dim').", seq_lens=(None,), decodes=(262143, 1048575)),
    "gpt-oss-yarn32": dict(
        params=rope_params(64, 150000.0, "half", scaling={
            "rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096,
            "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False}),
        source="gpt-oss: head_dim 64, rope_theta 150000, yarn factor 32, original 4096, "
        "truncate false (no floor/ceil of the ramp ends) (https://huggingface.co/openai/gpt-oss-20b).",
        seq_lens=(None,)),
    "phi3-128k-longrope": dict(
        params=rope_params(96, 1e4, "half", scaling={
            "rope_type": "longrope", "short_factor": list(PHI3_SHORT), "long_factor": list(PHI3_LONG),
            "original_max_position_embeddings": 4096, "max_position_embeddings": 131072}),
        source="Phi-3 128k (LongRoPE, 'su'): head 96, rope_theta 10000, original 4096, max 131072, "
        "short and long factors of Phi-3-vision-128k-instruct's config; attention factor "
        "sqrt(1 + ln 32 / ln 4096).", seq_lens=(4096, 4097)),
    "llama2-dynamic2": dict(
        params=rope_params(128, 1e4, "half", scaling={
            "rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 4096}),
        source="Llama-2 with dynamic NTK scaling, factor 2 (HF rope_scaling {'type': 'dynamic', "
        "'factor': 2.0}), original 4096.", seq_lens=(2048, 4096, 16384)),
    "qwen3-length-8k": dict(
        params=rope_params(128, 1e6, "half", scaling={
            "rope_type": "length", "original_max_position_embeddings": 8192}),
        source="The length rule of seed document 003 (dynamic RoPE as described for Qwen3): "
        "theta' = theta * min(1, L0 / L), L0 = 8192.", seq_lens=(4096, 8192, 32768)),
    "llama2-linear4": dict(
        params=rope_params(128, 1e4, "half", scaling={"rope_type": "linear", "factor": 4.0}),
        source="Linear position interpolation (Chen et al. 2023) by 4 on Llama-2 (4096 -> 16384).",
        seq_lens=(None,)),
    "llama2-ntk4": dict(
        params=rope_params(128, 1e4, "half", scaling={"rope_type": "ntk", "factor": 4.0}),
        source="Static NTK-aware scaling by 4 on Llama-2: base 10000 * 4**(128/126).",
        seq_lens=(None,)),
}


def _attention_factor(params):
    from reference import rope

    return float(rope.frequencies(params["rotary_dim"], params["base"], params["scaling"], None)[1])


def _scaling_flags(name):
    scaling = SCALED_MODELS[name]["params"]["scaling"]
    flags = ("Scaling",)
    if scaling["rope_type"] in ("dynamic", "length", "longrope"):
        flags += ("SeqLenDependent",)
    params = SCALED_MODELS[name]["params"]
    if scaling["rope_type"] in ("yarn", "longrope") and _attention_factor(params) != 1.0:
        flags += ("AttentionFactor",)
    if "attention_factor" in scaling or "mscale" in scaling:
        flags += ("ExplicitAttentionFactor",)
    if params["rotary_dim"] < params["head_dim"]:
        flags += ("PartialRotary", "PartialRotaryScaling")
    return flags


def _scaled_group(protocol, name, tests):
    model = SCALED_MODELS[name]
    layout = model["params"]["layout"]
    return GroupSpec(protocol, name, model["source"], (TestGroupSpec(
        model["params"], _configured(tests, layout, *_scaling_flags(name)), model["source"]),))


def _scaled_position_tests(name):
    """prefill, a long decode and, for seq_len-dependent types, one case per seq_len (the
    positions fit below it, seq_len given explicitly)."""
    seq_lens = SCALED_MODELS[name]["seq_lens"]
    if seq_lens == (None,):
        decodes = SCALED_MODELS[name].get("decodes", (131071,))
        return (prefill(),) + tuple(decode(p, f" A {(p + 1) // 1024}K-context decode step, where scaling matters.")
                                    for p in decodes)
    tests = []
    for n in seq_lens:
        tests.append(replace(decode(n - 1, f" seq_len {n}."), name=f"decode-{n - 1}-seq{n}", seq_len=n))
    return tuple(tests)


def _scaled_groups():
    groups = [_scaled_group("rope.apply", name, _scaled_position_tests(name)) for name in SCALED_MODELS]
    # rope.cache and rope.frequencies do not depend on the pair layout: a model's other-layout
    # variant (same_tables_as) adds nothing there.
    tables = [name for name, model in SCALED_MODELS.items() if "same_tables_as" not in model]
    groups += [_scaled_group("rope.cache", name, _scaled_position_tests(name)) for name in tables]
    for name in tables:
        model = SCALED_MODELS[name]
        tests = tuple(_frequency_test(f"inv-freq-seq{n}" if n else "inv-freq",
                                      f"inv_freq and attention_factor of {name}" + (f" at seq_len {n}." if n else "."),
                                      _scaling_flags(name), n)
                      for n in model["seq_lens"])
        groups.append(GroupSpec("rope.frequencies", name, model["source"],
                                (TestGroupSpec(model["params"], tests, model["source"]),)))
    # The numerical snapshots of HF's tests/utils/test_modeling_rope_utils.py (dim 128, base 1e4,
    # factor 10, original 2048): the same configurations, certified here.
    hf = {"dynamic": {"rope_type": "dynamic", "factor": 10.0, "original_max_position_embeddings": 2048},
          "yarn": {"rope_type": "yarn", "factor": 10.0, "beta_fast": 32.0, "beta_slow": 1.0,
                   "original_max_position_embeddings": 2048},
          "llama3": {"rope_type": "llama3", "factor": 10.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 2048}}
    test_groups = tuple(TestGroupSpec(rope_params(128, 1e4, "half", scaling=sc), (_frequency_test(
        f"{kind}-factor10", f"HF's {kind} snapshot: dim 128, base 10000, factor 10, original 2048"
        + (", seq_len 16384." if kind == "dynamic" else "."), ("Scaling",), 16384 if kind == "dynamic" else None),))
        for kind, sc in hf.items())
    groups.append(GroupSpec("rope.frequencies", "hf-snapshots", "The configurations of HF's RoPE "
                            "numerical tests (test_modeling_rope_utils.py).", test_groups))
    return groups


# --------------------------------------------------------------------------------------------
# rope.apply_qk: q and k rotated in one call, k with fewer heads (grouped-query attention)


@dataclass(frozen=True)
class QkTest(RopeTest):
    """A rope.apply_qk case: q has ``heads`` heads, k ``kv_heads`` (1 = multi-query)."""

    kv_heads: int = 1


def _qk_tests():
    rows = tuple((p,) for p in (4095, 131071, 17))
    return (
        QkTest("prefill-gqa4", "Prompt of 6 tokens, 8 query heads sharing 2 KV heads (groups of 4), as "
               "Llama-3-8B's 32 / 8.", ("Prefill", "GroupedQuery"), (tuple(range(6)),), heads=8, kv_heads=2),
        QkTest("decode-mqa-b3", f"Batched decode, one token per row at {[r[0] for r in rows]}, 4 query heads "
               "and one KV head (multi-query): a fused kernel that skips k when it has a single head fails.",
               ("Decode", "BatchedDecode", "GroupedQuery", "LongContext"), rows, heads=4, kv_heads=1),
        QkTest("left-padded-mqa", "Left-padded batch of 3 rows (HF position ids), 3 query heads, one KV head.",
               ("LeftPadding", "GroupedQuery"), tuple(_hf_left_padded(6, p) for p in (2, 0, 4)), heads=3,
               kv_heads=1),
    )


def fresh_apply_qk(draw):
    """One grouped-query case drawn at run time: a model configuration, 4 or 8 query heads over 1
    or 2 KV heads, 1 to 3 rows of 1 to 4 tokens at positions below 2^17."""
    name = draw.choice(("llama3-d128", "llama2-d128-meta", "gpt-neox-20b"))
    model = MODELS[name]
    b, s = draw.integer(1, 3), draw.integer(1, 4)
    rows = tuple(tuple(draw.integers(0, 2**17 - 1, s)) for _ in range(b))
    heads, kv = draw.choice((4, 8)), draw.choice((1, 2))
    test = QkTest(f"{name}-q{heads}-kv{kv}", f"Drawn at run time: {name}'s configuration, {heads} query heads over "
                  f"{kv} KV head(s), {b} x {s} positions.", _model_flags(name) + ("GroupedQuery",
                  LAYOUT_FLAG[model["params"]["layout"]]), rows, heads=heads, kv_heads=kv)
    return [TestGroupSpec(model["params"], (test,), model["source"])]


def _qk_groups():
    return [_model_group("rope.apply_qk", name, _qk_tests()) for name in ("llama3-d128", "llama2-d128-meta")]


def groups() -> list[GroupSpec]:
    """Every RoPE group, in a fixed order: rope.apply, rope.cache, rope.frequencies, then the
    scaled groups of each, then rope.apply_qk."""
    return (_apply_groups() + _cache_groups() + _frequency_groups() + _scaled_groups() + _qk_groups()
            + module_vectors.groups())


# --------------------------------------------------------------------------------------------
# Protocols: parameters, inputs, expected values, shapes, exact values


def _positions(test: RopeTest) -> np.ndarray:
    rows = {len(r) for r in test.positions}
    if len(rows) != 1:
        raise ValueError(f"{test.name}: position rows must have equal lengths")
    return np.array(test.positions, dtype=np.int64)


def _test_params(test: RopeTest, positions) -> dict:
    """Per-test parameters: seq_len, the catalog's or max position + 1; the tensor layout,
    cu_seqlens and in-place flag only where they differ from the default (shape matrix)."""
    seq_len = test.seq_len
    if seq_len is None:
        seq_len = int(positions.max()) + 1
    params = {"seq_len": seq_len}
    if getattr(test, "tensor_layout", "bshd") != "bshd":
        params["tensor_layout"] = test.tensor_layout
    if getattr(test, "cu_seqlens", None) is not None:
        params["cu_seqlens"] = list(test.cu_seqlens)
    if getattr(test, "inplace", False):
        params["inplace"] = True
    return params


def build_apply(case_id: str, params: dict, test: RopeTest):
    """positions int64 [b, s] from the catalog and x [b, s, heads, head_dim] (fixed, or seeded by
    the case id and exactly representable in bfloat16 and float16)."""
    positions = _positions(test)
    b, s = positions.shape
    if test.x is not None:
        x = np.array(test.x, dtype=np.float64)
        if x.shape != (b, s, test.heads, params["head_dim"]):
            raise ValueError(f"{case_id}: fixed x has shape {x.shape}")
    else:
        x = representable_inputs(case_id, (b, s, test.heads, params["head_dim"]))
    return _test_params(test, positions), {"x": x, "positions": positions}


def build_apply_qk(case_id: str, params: dict, test: QkTest):
    """positions int64 [b, s], q [b, s, heads, head_dim] and k [b, s, kv_heads, head_dim], seeded
    by the case id (roles "q" and "k") and exactly representable in bfloat16 and float16."""
    positions = _positions(test)
    b, s = positions.shape
    q = representable_inputs(case_id, (b, s, test.heads, params["head_dim"]), role="q")
    k = representable_inputs(case_id, (b, s, test.kv_heads, params["head_dim"]), role="k")
    return _test_params(test, positions), {"q": q, "k": k, "positions": positions}


def compute_apply_qk(params: dict, inputs: dict, backend: str) -> dict:
    """``q_expected``, ``k_expected``: rope.apply_qk is rope.apply on q and on k with the same
    positions (golden mode: each value the float64 nearest to the exact rotation)."""
    out = {}
    for role in ("q", "k"):
        out[f"{role}_expected"] = compute_apply(params, {"x": inputs[role], "positions": inputs["positions"]},
                                                backend)["expected"]
    return out


def shapes_apply_qk(params: dict, arrays: dict) -> dict:
    positions = arrays["positions"]
    if positions.ndim != 2:
        return {"positions": ("batch", "seq")}
    b, s = positions.shape
    out = {}
    for role in ("q", "k"):
        heads = arrays[role].shape[2] if arrays[role].ndim == 4 else "heads"
        out[role] = out[f"{role}_expected"] = (b, s, heads, params["head_dim"])
    return out


def exact_apply_qk(params: dict, inputs: dict) -> dict:
    return {f"{role}_expected": exact_apply(params, {"x": inputs[role], "positions": inputs["positions"]})["expected"]
            for role in ("q", "k")}


def build_cache(case_id: str, params: dict, test: RopeTest):
    positions = _positions(test)
    return _test_params(test, positions), {"positions": positions}


def build_frequencies(case_id: str, params: dict, test: RopeTest):
    return {"seq_len": test.seq_len}, {}


def _scaling(params: dict) -> dict:
    """The scaling keywords of reference.rope for a case (seq_len only matters when scaled)."""
    if params.get("scaling") is None:
        return {}
    return {"scaling": params["scaling"], "seq_len": params.get("seq_len")}


def compute_apply(params: dict, inputs: dict, backend: str) -> dict:
    """``expected`` = reference.rope.apply(x, positions, mode="golden") [b, s, h, head_dim]:
each value the float64 nearest to the exact rotation."""
    from reference import rope

    expected = rope.apply(inputs["x"], inputs["positions"], rotary_dim=params["rotary_dim"],
                          base=params["base"], layout=params["layout"], backend=backend, mode="golden",
                          **_scaling(params))
    return {"expected": np.asarray(expected, dtype=np.float64)}


def compute_cache(params: dict, inputs: dict, backend: str) -> dict:
    """``cos``, ``sin`` = reference.rope.cos_sin(positions, mode="golden") [b, s, r/2], each
correctly rounded."""
    from reference import rope

    cos, sin = rope.cos_sin(inputs["positions"], params["rotary_dim"], params["base"], backend=backend,
                            mode="golden", **_scaling(params))
    return {"cos": np.asarray(cos, dtype=np.float64), "sin": np.asarray(sin, dtype=np.float64)}


def compute_frequencies(params: dict, inputs: dict, backend: str) -> dict:
    """``inv_freq`` [r/2] and ``attention_factor`` (0-d) from reference.rope.frequencies (mpmath:
    the same on every backend)."""
    from reference import rope

    inv, factor = rope.frequencies(params["rotary_dim"], params["base"], scaling=params["scaling"],
                                   seq_len=params["seq_len"])
    return {"inv_freq": np.asarray(inv, dtype=np.float64),
            "attention_factor": np.array(factor, dtype=np.float64)}


def shapes_apply(params: dict, arrays: dict) -> dict:
    positions = arrays["positions"]
    if positions.ndim != 2:
        return {"positions": ("batch", "seq")}
    b, s = positions.shape
    x = arrays["x"]
    heads = x.shape[2] if x.ndim == 4 else "heads"
    return {"x": (b, s, heads, params["head_dim"]), "expected": (b, s, heads, params["head_dim"])}


def shapes_cache(params: dict, arrays: dict) -> dict:
    positions = arrays["positions"]
    if positions.ndim != 2:
        return {"positions": ("batch", "seq")}
    shape = positions.shape + (params["rotary_dim"] // 2,)
    return {"cos": shape, "sin": shape}


def shapes_frequencies(params: dict, arrays: dict) -> dict:
    return {"inv_freq": (params["rotary_dim"] // 2,), "attention_factor": ()}


def exact_apply(params: dict, inputs: dict) -> dict:
    from reference.rope import oracle

    return {"expected": oracle.apply_exact(inputs["x"], inputs["positions"], params["rotary_dim"],
                                           params["base"], params["layout"], **_scaling(params))}


def exact_cache(params: dict, inputs: dict) -> dict:
    from reference.rope import oracle

    positions = inputs["positions"]
    cos, sin = oracle.cos_sin_exact(positions.reshape(-1), params["rotary_dim"], params["base"],
                                    **_scaling(params))
    shape = positions.shape + (params["rotary_dim"] // 2,)
    return {"cos": np.array(cos, dtype=object).reshape(shape),
            "sin": np.array(sin, dtype=object).reshape(shape)}


def exact_frequencies(params: dict, inputs: dict) -> dict:
    """theta'_i and the attention factor in mpmath (oracle: the plain ladder with the base taken
    exactly from its float64 value, or scaling_oracle's independent formulas of the scaled types)."""
    import mpmath

    from reference.rope import oracle

    with mpmath.workprec(oracle.PREC_BITS):
        thetas, factor = oracle.frequencies_exact(params["rotary_dim"], params["base"], params["scaling"],
                                        params.get("seq_len"))
    return {"inv_freq": np.array(thetas, dtype=object), "attention_factor": np.array(factor, dtype=object)}


_EVEN = {"type": "integer", "minimum": 2, "multipleOf": 2}
PARAMS_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["head_dim", "rotary_dim", "base", "layout", "scaling", "seq_len"],
    "properties": {
        "head_dim": _EVEN,
        "rotary_dim": _EVEN,
        "base": {"type": "number", "exclusiveMinimum": 0},
        "layout": {"enum": ["half", "interleaved"]},
        "scaling": {"type": ["null", "object"]},
        "seq_len": {"type": ["null", "integer"], "minimum": 0},
        # Only in fresh shape-matrix cases (never stored): how rope.apply hands the case over.
        "tensor_layout": {"enum": ["bshd", "bhsd", "thd"]},
        "cu_seqlens": {"type": "array", "items": {"type": "integer", "minimum": 0}},
        "inplace": {"type": "boolean"},
    },
}

PROTOCOLS = {
    "rope.module": module_vectors.PROTOCOL,  # stateful modules: reference/rope/module_vectors.py
    "rope.apply": VectorProtocol(
        "rope.apply", {"x": "float64", "positions": "int64", "expected": "float64"},
        ("x", "positions"), PARAMS_SCHEMA, build_apply, compute_apply, shapes_apply, exact_apply,
        fresh=lambda draw, shapes="sample": fresh_apply(draw, shapes)),
    "rope.apply_qk": VectorProtocol(
        "rope.apply_qk", {"q": "float64", "k": "float64", "positions": "int64", "q_expected": "float64",
                          "k_expected": "float64"},
        ("q", "k", "positions"), PARAMS_SCHEMA, build_apply_qk, compute_apply_qk, shapes_apply_qk,
        exact_apply_qk, fresh=fresh_apply_qk),
    "rope.cache": VectorProtocol(
        "rope.cache", {"positions": "int64", "cos": "float64", "sin": "float64"},
        ("positions",), PARAMS_SCHEMA, build_cache, compute_cache, shapes_cache, exact_cache,
        fresh=lambda draw: _fresh_rotations(draw, "rope.cache")),
    "rope.frequencies": VectorProtocol(
        "rope.frequencies", {"inv_freq": "float64", "attention_factor": "float64"},
        (), PARAMS_SCHEMA, build_frequencies, compute_frequencies, shapes_frequencies,
        exact_frequencies, fresh=fresh_frequencies),
}
