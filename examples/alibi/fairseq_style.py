"""ALiBi as the authors' fairseq code computes it, written for the protocols.

Slopes: ``get_slopes`` (powers of two: start * ratio**i with start = 2^(-8/n); otherwise the power
below, then every other slope of twice it), as float32 tensors. Bias: the causal form adds
m_h * j (the key's position), which differs from -m_h (i - j) by the per-row constant m_h i that
softmax ignores; the bidirectional form is -m_h |i - j|.

Adapters: ``slopes`` (alibi.slopes), ``bias`` (alibi.bias).
"""

import math

import torch


def get_slopes(n):
    def power_of_2(c):
        start = 2 ** (-(2 ** -(math.log2(c) - 3)))
        return [start * start**i for i in range(c)]

    if math.log2(n).is_integer():
        return power_of_2(n)
    c = 2 ** math.floor(math.log2(n))
    return power_of_2(c) + get_slopes(2 * c)[0::2][: n - c]


def slopes(spec):
    return torch.tensor(get_slopes(spec.num_heads), dtype=torch.float32)


def bias(q_positions, k_positions, spec):
    m = slopes(spec)[:, None, None]
    if spec.causal:
        return (m * k_positions[None, None, :].float()).expand(-1, q_positions.numel(), -1)
    distance = (q_positions[:, None] - k_positions[None, :]).abs().float()
    return -m * distance
