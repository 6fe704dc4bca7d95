"""Bug (JAX): MaxText's rotation with the sine's sign slipped: ``first * cos + second * sin`` and
``second * cos - first * sin``, so every pair turns by -m * theta_i.

Graded with ``--framework jax`` (OPTIONS): the adapter takes and returns jax arrays. Expected
diagnosis: ``rotation-reversed``, as for the same slip in torch (rotation_reversed.py).
"""

from pathlib import Path

import jax.numpy as jnp

from conformance import Unsupported
from conformance.loader import load_target

# The correct JAX implementation, with one thing changed below.
_CORRECT = Path(__file__).resolve().parents[1] / "jax_maxtext.py"
sinusoid = load_target(f"{_CORRECT}:_sinusoid")

CODE = "rotation-reversed"
PROTOCOL = "rope.apply"
OPTIONS = {"framework": "jax"}


def apply(x, positions, spec):
    if spec.layout != "half" or getattr(spec, "tensor_layout", "bshd") != "bshd" or getattr(spec, "inplace", False):
        raise Unsupported("half layout, [b, s, h, d] only")
    sin, cos = sinusoid(positions, spec)
    sin, cos = sin[..., None, :], cos[..., None, :]
    r = spec.rotary_dim
    first, second = jnp.split(x[..., :r], 2, axis=-1)
    out = jnp.concatenate([first * cos + second * sin, second * cos - first * sin], axis=-1)  # BUG: sign of sin
    return jnp.concatenate([out.astype(x.dtype), x[..., r:]], axis=-1)
