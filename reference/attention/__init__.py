"""reference.attention: one attention layer's output (scaled dot-product attention) in float64.

Formula (Vaswani et al., arXiv 1706.03762, eq. 1; grouped-query heads: Ainslie et al., arXiv
2305.13245; the layer as Hugging Face's LlamaAttention computes it):

    q = X W_q^T, k = X W_k^T, v = X W_v^T           X [b, s, D]; W_q [hq d, D]; W_k, W_v [hkv d, D]
    q, k <- R(position) q, R(position) k            encoding "rope" (reference.rope.apply, any
                                                    scaling; its attention factor f multiplies
                                                    cos and sin, so the logits carry f^2)
    z_hij = q_hi . k_gj / sqrt(d) + b_hij            g = h // (hq / hkv) (HF repeat_kv); b the
                                                    encoding's additive bias: ALiBi -m_h (p_i - p_j)
                                                    (|.| when not causal), KERPLE (r1, r2 in the
                                                    config), FIRE (its MLP in the weights dict), T5
                                                    (rel_bias[bucket(p_j - p_i), h], the table in
                                                    the weights dict); 0 for "rope" and "none"
    P_hij = softmax_j(z_hi.) over the visible keys  visible: mask[key] and (not causal or key slot
                                                    <= query slot)
    o_hi = sum_j P_hij v_gj;  out = concat_h(o_hi) W_o^T    W_o [D, hq d]  -> out [b, s, D]

KV cache (decode): past_keys, past_values [b, hkv, P, d] (post-projection, post-RoPE, as HF's
cache holds them) occupy key slots 0..P-1 at positions 0..P-1 (ALiBi reads those positions); the s
new tokens occupy slots P..P+s-1 at their given positions. attention_mask [b, P + s] (True = a
real token) masks keys; rows of masked queries, and rows without a visible key (0 there), are
not meaningful and are not graded.

API: ``forward(hidden, weights, positions, config, *, attention_mask, past_keys, past_values,
backend, mode)`` -> [b, s, D]; ``stages(...)`` -> the float64 intermediates (for budgets);
``visible(config, attention_mask, b, s, P)`` -> bool [b, s, P + s]; ``Config``.
Fast mode: projections and dot products by Dot2 (Ogita, Rump, Oishi 2005, as accurate as
twice the working precision), softmax sums compensated (TwoSum), exp from libm; within
``fast_bound`` (per element: rho N + u |out|, N the output on magnitudes; a logit's absolute
error passes through exp, so the error is not a few ulps of |out|: forward_bound.fast_bound).
Golden mode: the whole chain in mpmath at 192 bits from the float64 inputs, each output rounded
to the nearest double (faithful at worst; certified against oracle.py). Backends cpu (Numba),
cuda, numpy. Never imports torch.

Backward (issue 15): ``backward.vjp(g, hidden, weights, positions, config, ...)`` -> the gradients
of hidden, wq, wk, wv, wo (fast: NumPy by default, or the Numba cpu / cuda kernels with
backend=, within a derived bound; golden: mpmath, faithfully rounded, certified against
``oracle.vjp_exact``); see backward.py.
"""

from .core import Config, forward, key_positions, stages, visible
from .forward_bound import fast_bound

__all__ = ["Config", "fast_bound", "forward", "key_positions", "stages", "visible"]
