"""RoPE's vector flags: ``NOTES`` explains each flag a RoPE case carries (Wycheproof style: bugType,
description, links), with the sources the links point to. rope.module's flags come from
module_vectors.py, rope.cp_positions's from cp_vectors.py.
"""

from __future__ import annotations

from reference.rope import cp_vectors, fp8_vectors, kv_write_vectors, module_vectors, qk_norm_vectors


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
    **cp_vectors.NOTES,  # rope.cp_positions's flags
    **kv_write_vectors.NOTES, **fp8_vectors.NOTES,  # rope.kv_write's and rope.apply_qk_fp8's flags
    **qk_norm_vectors.NOTES,  # rope.qk_norm's flags
}
