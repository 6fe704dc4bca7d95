"""Bug: m_k = 2^(-8k/n) for every head count, also where n is not a power of two (12, 20, 40, 80,
96), where the authors' rule takes the power below and every other slope of twice it.

Adapter: slopes (alibi.slopes). Expected diagnosis: ``slopes-power-of-two-rule``.
"""

import torch

CODE = "slopes-power-of-two-rule"
PROTOCOL = "alibi.slopes"


def slopes(spec):
    n = spec.num_heads
    return 2.0 ** (-8.0 * torch.arange(1, n + 1, dtype=torch.float64) / n)  # BUG: for any n
