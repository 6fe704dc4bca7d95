"""Bug (JAX): a hand-written ``jax.custom_vjp`` whose backward rotates the cotangent with the
forward's rotation R_m g instead of its transpose R_{-m} g (the sine keeps its sign).

The forward is MaxText's and right, so posref without --grad passes it; with ``--grad`` posref
computes the gradient through ``jax.vjp`` (which runs this custom backward) and every token at
m != 0 has its gradient turned 2 m theta_i too far. Graded with ``--framework jax --grad``
(OPTIONS). Expected diagnosis: ``backward-transposed``; the float64 gradcheck fails as well.
"""

from pathlib import Path

import jax
import jax.numpy as jnp

from conformance import Unsupported
from conformance.loader import load_target

# The correct JAX implementation, with one thing changed below.
_CORRECT = Path(__file__).resolve().parents[1] / "jax_maxtext.py"
sinusoid = load_target(f"{_CORRECT}:_sinusoid")

CODE = "backward-transposed"
PROTOCOL = "rope.apply"
OPTIONS = {"framework": "jax", "grad": True, "cases": "rope.apply/llama2-d128/*", "fresh": False}


def _turn(x, sin, cos, r):
    first, second = jnp.split(x[..., :r], 2, axis=-1)
    out = jnp.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)
    return jnp.concatenate([out.astype(x.dtype), x[..., r:]], axis=-1)


def apply(x, positions, spec):
    if spec.layout != "half" or getattr(spec, "tensor_layout", "bshd") != "bshd" or getattr(spec, "inplace", False):
        raise Unsupported("half layout, [b, s, h, d] only")
    sin, cos = sinusoid(positions, spec)
    sin, cos = sin[..., None, :], cos[..., None, :]
    r = spec.rotary_dim

    @jax.custom_vjp
    def rotate(x):
        return _turn(x, sin, cos, r)

    def forward(x):
        return rotate(x), None

    def backward(_, g):
        return (_turn(g, sin, cos, r),)  # BUG: R_m g; the transpose is _turn(g, -sin, cos, r)

    rotate.defvjp(forward, backward)
    return rotate(x)
