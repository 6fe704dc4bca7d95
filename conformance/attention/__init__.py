"""Conformance for an attention layer: protocol ``attention.forward`` (forward.py).

``fn(hidden, weights, positions, spec) -> out [batch, seq, d_model]``: the layer's output given
its weights (nn.Linear layout, no biases), with RoPE (any scaling), an additive position bias
(ALiBi, KERPLE, FIRE's MLP, T5's bucketed table; FIRE's and T5's learned weights as extra entries
of the weights dict) or no encoding, causal
or not, grouped-query heads, a padding mask and a KV cache (``spec``: an :class:`AttentionSpec`).
Graded against the float64 reference on the rounded inputs, with a budget derived from the
arithmetic in the dtype (budgets.py); a failing output is explained by fitting the usual faults
(models.py). With ``--grad`` the gradients of hidden and the four weights are graded against
the float64 reference backward with a derived budget (backward.py, budgets.gradient_budget).

Protocol ``attention.mla`` (mla.py): DeepSeek's multi-head latent attention from its parts,
``fn(q_nope, q_pe, k_nope, k_pe, v, positions, spec) -> out [batch, seq, heads, d_v]`` with an
:class:`MlaSpec`: the decoupled rope features, YaRN's mscale and mscale_all_dim, the softmax scale.
Protocol ``attention.decode`` (decode.py): ``fn(weights, spec) -> layer``, the layer with its own
KV cache called step after step (prefill, decode) as ``layer(hidden, positions, attention_mask)``;
each step graded against attention.forward over the whole history (spec.semantics: "recompute",
HF's, or "fixed", vLLM's), diagnosed with the cache faults above.
"""

from conformance.attention.decode_spec import DecodeSpec
from conformance.attention.spec import AttentionSpec
from conformance.core.family import Family

FAMILY = Family(
    name="attention",
    protocols=("forward", "mla", "decode"),
    codes={
        "attention-encoding": "the position encoding inside attention is wrong: RoPE at positions restarting "
                              "from 0 or off by one (a KV-cache offset ignored), the other pair layout, or none; "
                              "an additive bias (ALiBi, KERPLE, FIRE, T5) with the opposite sign, KERPLE's other "
                              "variant, T5's buckets of the other direction, or no bias",
        "attention-causal-off-by-one": "the causal mask is shifted by one: a query sees the next token, or not itself",
        "attention-padding-ignored": "the padding mask is ignored: padded keys get attention weight",
        "attention-scale-missing": "the logits are not scaled by 1/sqrt(head_dim)",
        "attention-scale-wrong": "the logits are scaled by 1/sqrt(head_dim) where the layer's logit scale is another "
                                 "(T5's unscaled scores: SDPA's default scale kept)",
        "attention-factor-twice": "the RoPE attention factor (YaRN, LongRoPE) is applied twice: the logits carry "
                                  "its fourth power instead of its square",
        "attention-heads-permuted": "the q or k projection rows are permuted within heads (each head's rows in the "
                                    "other pair layout's order, or a checkpoint converter's per-head permutation "
                                    "run with a wrong head count, as llama.cpp's convert.py and HF's GGUF loader "
                                    "did for grouped-query k), or query heads read kv head h % hkv instead of "
                                    "h // (hq / hkv)",
        "mla-mscale-missing": "MLA's softmax scale lacks YaRN's m^2: the logits are scaled by (d_nope + d_rope)^-1/2 "
                              "only, m = 0.1 mscale_all_dim ln(factor) + 1 left out (transformers' DeepSeek-V2 and "
                              "Mistral 4 attention before PR 47435)",
        "mla-mscale-wrong-field": "MLA's softmax scale computes m from mscale instead of mscale_all_dim "
                                  "(Megatron-LM issue 1429); differs only where the two fields differ",
        "mla-rope-factor": "MLA's rope part (q_pe, k_pe) has the wrong cos / sin factor: YaRN's generic 0.1 ln(factor) "
                           "+ 1, or none, instead of mscale(factor, mscale) / mscale(factor, mscale_all_dim)",
        "cache-stale-base": "attention.decode: the cached keys kept the dynamic-NTK base of the step that computed "
                            "them while the queries use the current length's (HF #25104)",
        "cache-table-mismatch": "attention.decode: LongRoPE keys cached with the short table while the queries use "
                                "the long one, each call choosing its table by its own length (vLLM #27414)",
        "decode-position-off-by-one": "attention.decode: every decode token rotated one position past or short of "
                                      "the cache length, its key kept so in the cache (tt-metal's Falcon decode)",
    },
    exports={"AttentionSpec": "conformance.attention.spec:AttentionSpec",
             "MlaSpec": "conformance.attention.mla_spec:MlaSpec",
             "DecodeSpec": "conformance.attention.decode_spec:DecodeSpec"},
)

__all__ = ["AttentionSpec", "DecodeSpec", "FAMILY"]
