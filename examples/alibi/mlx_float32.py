"""MLX's ALiBi slopes (``mlx.nn.ALiBi.create_alibi_slope``) re-enacted in torch float32.

MLX computes x = (2**8) ** (1 / n) in Python and then ``mx.power(x, -arange(1, n + 1))`` in
float32: x rounded to float32 once, then raised to the k-th power, so slope k carries k times x's
rounding (up to 2.25 budgets at 32 and 64 heads under a flat 8-rounding budget). MLX applies this
power-of-two form to every head count.

Adapters: ``slopes`` (alibi.slopes) for head counts that are powers of two, where the form is the
authors' rule (raises Unsupported for the others); ``slopes_any_count`` is MLX as shipped, which
for 12 heads, say, is the ``slopes-power-of-two-rule`` mistake.
"""

import torch

from conformance import Unsupported


def slopes_any_count(spec):
    n = spec.num_heads
    x = torch.tensor((2**8) ** (1 / n), dtype=torch.float32)
    return torch.pow(x, -torch.arange(1, n + 1, dtype=torch.float32))


def slopes(spec):
    n = spec.num_heads
    if n & (n - 1):
        raise Unsupported("MLX's form 2^(-8k/n) is the authors' rule for powers of two only")
    return slopes_any_count(spec)
