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
"""

from conformance.attention.spec import AttentionSpec
from conformance.core.family import Family

FAMILY = Family(
    name="attention",
    protocols=("forward",),
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
    },
    exports={"AttentionSpec": "conformance.attention.spec:AttentionSpec"},
)

__all__ = ["AttentionSpec", "FAMILY"]
