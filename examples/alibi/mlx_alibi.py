"""MLX's own ALiBi (``mlx.nn.ALiBi``), graded with ``--framework mlx``: the adapters take and
return ``mlx.core.array``.

Slopes: ``mlx.nn.ALiBi.create_alibi_slope(num_heads)`` as MLX ships it (the authors' rule: powers
of two, else the power below and every other slope of twice it; float32), flattened from its
[heads, 1, 1] broadcast shape. Bias: ``create_alibi_matrix``'s formula, ``-|i - j| * slope`` in
float32, evaluated at the positions posref hands over (``create_alibi_matrix`` itself builds them
with ``arange``). Causal cases grade keys j <= i only, where -|i - j| = j - i.

    posref conform examples/alibi/mlx_alibi.py:slopes --protocol alibi.slopes --framework mlx
    posref conform examples/alibi/mlx_alibi.py:bias --protocol alibi.bias --framework mlx

(examples/alibi/mlx_float32.py re-enacts MLX's earlier power-of-two-only slopes in torch.)
"""

import mlx.core as mx
import mlx.nn as nn

FRAMEWORK = "mlx"  # the array library its adapters take and return (posref conform --framework mlx)


def slopes(spec):
    return nn.ALiBi.create_alibi_slope(num_heads=spec.num_heads, dtype=mx.float32).reshape(-1)


def bias(q_positions, k_positions, spec):
    distance = -mx.abs(q_positions[:, None] - k_positions[None, :])[None]
    return (distance * nn.ALiBi.create_alibi_slope(num_heads=spec.num_heads)).astype(mx.float32)
