"""transformers' MPT ALiBi, ``build_mpt_alibi_tensor`` (transformers.models.mpt.modeling_mpt,
after MosaicML's attention.py), graded through thin adapters as a user would write them.

The library takes the next power of two n' >= num_heads, the series 2^(-alibi_bias_max k / n')
for k = 1 .. n' in float32, and for a head count that is not a power of two the odd-indexed
entries first, then the even-indexed ones, cut to num_heads: at alibi_bias_max = 8 (MPT's
default) these are Press et al.'s slopes (the power of two below, then the odd steps of the
series above). The bias is slope * (j - (L - 1)) for keys j = 0 .. L - 1: the m j form shifted by
the per-row constant softmax ignores. Graded at transformers 5.24.0.

Adapters: ``slopes`` (alibi.slopes: minus the bias at key distance 1), ``bias`` (alibi.bias: the
table up to the largest key position, read at the case's keys). Needs ``transformers`` (the
``test`` extra); the tests skip without it.
"""

from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor

from conformance import Unsupported

LIBRARY = "transformers"
SURVEY = [("alibi.slopes", "slopes"), ("alibi.bias", "bias")]

BIAS_MAX = 8  # MptAttentionConfig's alibi_bias_max default: the only value that gives the paper's slopes


def slopes(spec):
    alibi = build_mpt_alibi_tensor(spec.num_heads, 2, alibi_bias_max=BIAS_MAX)  # [heads, 1, 2]: -m, 0
    return -alibi[:, 0, 0]


def bias(q_positions, k_positions, spec):
    if spec.causal is False:
        raise Unsupported("MPT's ALiBi is the causal form only (keys up to the query)")
    if k_positions.numel() and int(k_positions.min()) < 0:
        raise Unsupported("key positions from 0 (the table's arange)")
    length = int(k_positions.max()) + 1 if k_positions.numel() else 1
    table = build_mpt_alibi_tensor(spec.num_heads, length, alibi_bias_max=BIAS_MAX)  # [heads, 1, L]
    row = table[:, 0, k_positions]  # [heads, sk]: m_h (j - L + 1)
    return row[:, None, :].expand(-1, q_positions.numel(), -1)
