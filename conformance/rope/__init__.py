"""Conformance for rotary position embeddings (RoPE): protocols, budgets, probe and diagnosis.

Protocols (one module each): ``rope.apply`` (apply.py), ``rope.cache`` (cache.py),
``rope.frequencies`` (frequencies.py), ``rope.apply_qk`` (apply_qk.py: q and k in one call),
``rope.module`` (module.py: a stateful module driven by a script; module_state.py explains),
``rope.cp_positions`` (cp_positions.py: the tokens a context-parallel rank holds of a packed batch),
``rope.cp_apply`` (cp_apply.py: those tokens rotated at their positions),
``rope.kv_write`` (kv_write.py: RoPE fused with the paged KV-cache write; kv_placement.py checks the
caches), ``rope.apply_qk_fp8`` (apply_qk_fp8.py: q and k rotated then quantised to float8 e4m3),
``rope.qk_norm`` (qk_norm.py: Qwen3's and OLMo 2's RMSNorm of q and k, then RoPE).

``spec`` is a :class:`RopeSpec` (spec.py). The mutants that name a fault are in diagnosis.py, the
black-box identity checks in blackbox.py, the backward in backward.py. What the rotary families
share lives in conformance/core: the rotation budgets (rotation_budgets.py, derived in
docs/tolerance.md), RopeSpec and the tensor layouts (rotation_spec.py), the float64 tables the
protocols grade against (rotation_reference.py), rope.apply's grading (rotation_apply.py), the
pair-layout probe (layout_probe.py) and the family-free backward pieces (rotation_backward.py).
"""

from conformance.core.family import Family
from conformance.rope.spec import RopeSpec

FAMILY = Family(
    name="rope",
    protocols=("apply", "cache", "frequencies", "apply_qk", "module", "cp_positions", "cp_apply",
               "kv_write", "apply_qk_fp8", "qk_norm"),
    codes={
        "layout-swapped": "pairs follow the other layout (half (j, j + r/2) vs interleaved (2i, 2i+1))",
        "rotation-reversed": "pairs turn by -m*theta: the sine has the wrong sign",
        "position-offset": "positions shifted by a constant",
        "positions-ignored": "the given positions are not used (arange(seq), zeros, or one row's)",
        "wrong-base": "theta_i computed with another base",
        "frequency-exponent": "the exponent of theta_i is wrong (base**(-i/d), 1-based index, ...)",
        "angle-precision": "angles, positions or frequencies kept in bfloat16 or float16",
        "pair-angle-mismatch": "the two elements of a pair turn by different angles (cos/sin expanded "
                               "for the other layout)",
        "rotary-dim-mismatch": "head_dim and rotary_dim confused (partial rotary)",
        "attention-factor": "cos and sin (or the output) scaled by a wrong attention factor",
        "output-scaled": "every output element scaled by one constant, the pass-through features of partial "
                         "rotary too (not an attention factor, which scales only the rotated features)",
        "cos-sin-as-angles": "the cos and sin tables fed where the angles are expected (Megatron's "
                             "cos(cos(m*theta))): pairs turn by cos(m*theta) radians, so position 0 is not the "
                             "identity",
        "output-permuted": "every value right but in another feature slot: the rotary features returned in the "
                           "other layout's order (rotated in interleaved pairs and returned de-interleaved, evens "
                           "then odds, as DeepSeek-V3's Hugging Face port stores q_pe and k_pe; or the reverse)",
        "scaling-mismatch": "a position scaling the case does not have, or the case's scaling left out",
        "batch-row-zero-only": "only batch row 0 is rotated (the other rows come back unrotated), e.g. a "
                               "fused kernel at a batched decode step of one token per row",
        "positions-from-heads-axis": "positions read along the heads axis: a token of head h turns by "
                                     "the position of token h of its row",
        "tile-tail-unrotated": "the tokens past the last full tile (a length not a multiple of the "
                               "tile, e.g. 64) come back unrotated",
        "k-unrotated": "rope.apply_qk: k comes back unrotated (e.g. with one KV head, or fewer KV "
                       "heads than query heads)",
        "stale-state": "rope.module: a step's output matches the reference state of an earlier step "
                       "(its frequencies or its cos/sin tables), e.g. dynamic NTK keeping the scaled "
                       "base after a long prompt, or a cache keyed on the length alone",
        "longrope-switch": "rope.module: LongRoPE's short and long factors switched at the wrong length "
                           "(long only once the length, largest position + 1, exceeds the original)",
        "cp-sequence-offset": "context parallelism (rope.cp_positions): pack indices without the sequence's "
                              "offset cu_seqlens[j], so later sequences read sequence 0's rows (Megatron-LM PR "
                              "#5243: [0, 3, 0, 3] for [0, 3, 4, 7])",
        "cp-positions-global": "context parallelism (rope.cp_positions, rope.cp_apply): indices into the pack "
                               "used where positions within the sequence were asked (the sequence's offset not "
                               "subtracted)",
        "cp-split-swapped": "context parallelism (rope.cp_positions, rope.cp_apply): the other split "
                            "(contiguous for load-balanced, or the reverse)",
        "cp-wrong-chunks": "context parallelism (rope.cp_positions, rope.cp_apply): the rank holds other chunks "
                           "than its own (e.g. r and cp_size + r instead of r and 2 * cp_size - 1 - r)",
        "cp-chunk-restart": "context parallelism (rope.cp_positions, rope.cp_apply): positions restart at 0 in "
                            "each chunk (or count the rank's own tokens): the chunk's offset in its sequence is "
                            "not added",
        "kv-written-unrotated": "rope.kv_write: k written into the cache before RoPE (the cache holds k as given)",
        "kv-wrong-slot": "rope.kv_write: a token's k and v written at another slot than slot_mapping's (the block "
                         "table misread: slot = token index, block and offset swapped, ...)",
        "kv-padding-written": "rope.kv_write: a padding token (slot -1) written into the cache (indexing with -1 "
                              "writes the last slot)",
        "kv-value-rotated": "rope.kv_write: v rotated like k before it was written",
        "fp8-scale-inverted": "rope.apply_qk_fp8: the rotated values multiplied by the scale instead of divided",
        "fp8-not-saturated": "rope.apply_qk_fp8: values past e4m3's largest finite 448 become NaN instead of +-448 "
                             "(a cast that does not saturate: torch 2.11 eager, ml_dtypes, JAX)",
        "norm-after-rope": "rope.qk_norm: RoPE applied before the QK-norm (the norm's weight meets rotated "
                           "features; equal only for a uniform weight)",
        "norm-scope": "rope.qk_norm: the QK-norm over the other group: per head (Qwen3) where the spec says the "
                      "whole projection (OLMo 2), or the reverse",
    },
    exports={"RopeSpec": "conformance.rope.spec:RopeSpec", "QkNormSpec": "conformance.rope.qk_norm:QkNormSpec"},
)

__all__ = ["FAMILY", "RopeSpec"]
