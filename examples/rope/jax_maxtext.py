"""RoPE in JAX as MaxText and Flax write it, graded with ``--framework jax``.

MaxText's ``RotaryEmbedding`` and Flax's Gemma example build the angles from *timescales*, not
inverse frequencies: ``fraction = 2i / d`` for i < d/2 (float32), ``timescale = min_ts *
(max_ts / min_ts) ** fraction`` with min_ts = 1 and max_ts = the base (so timescale = base **
(2i/d)), ``sinusoid_inp = position / timescale`` in float32, then the "half" pairing: the input
split into its first and second halves, ``first * cos - second * sin`` and ``second * cos +
first * sin`` concatenated, computed in float32 (a bfloat16 input is promoted by the float32
tables) and cast back to the input's dtype. Partial rotary: the first spec.rotary_dim features
turn, the rest pass through. Scaling: none, "default" and "linear" (positions divided by the
factor, as MaxText's ``rope_linear_scaling_factor`` does); any other raises Unsupported, as does
the interleaved pairing and an in-place case (JAX arrays cannot be written in place).

Adapters: ``apply`` (rope.apply), ``apply_qk`` (rope.apply_qk), ``cache`` (rope.cache):

    posref conform examples/rope/jax_maxtext.py:apply --protocol rope.apply --framework jax [--grad]

Works under ``jax.jit`` too (the spec is static): :func:`apply_jit`.
"""

import functools

import jax
import jax.numpy as jnp

from conformance import Unsupported

FRAMEWORK = "jax"  # the array library its adapters take and return (posref conform --framework jax)


def _linear_factor(spec):
    scaling = dict(spec.scaling or {})
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind == "default":
        return 1.0
    if kind == "linear":
        return float(scaling["factor"])
    raise Unsupported(f"rope_type {kind!r} is not implemented by this example")


def _sinusoid(positions, spec):
    """(sin, cos) float32 [..., r/2]: position / timescale, timescale = base ** (2i / r)."""
    r = spec.rotary_dim
    fraction = 2 * jnp.arange(0, r // 2, dtype=jnp.float32) / r
    timescale = 1.0 * (spec.base / 1.0) ** fraction
    position = positions.astype(jnp.float32) / _linear_factor(spec)
    sinusoid_inp = position[..., jnp.newaxis] / timescale
    return jnp.sin(sinusoid_inp), jnp.cos(sinusoid_inp)


def cache(positions, spec):
    """(cos, sin) float32 [batch, seq, r/2] in pair order (rope.cache)."""
    sin, cos = _sinusoid(positions, spec)
    return cos, sin


def _rotate(inputs, sin, cos, spec):
    """inputs [b, s, h, d] with sin, cos [b, s, r/2]."""
    r = spec.rotary_dim
    sin, cos = sin[..., jnp.newaxis, :], cos[..., jnp.newaxis, :]
    rotary, rest = inputs[..., :r], inputs[..., r:]
    first_half, second_half = jnp.split(rotary, 2, axis=-1)
    first_part = first_half * cos - second_half * sin
    second_part = second_half * cos + first_half * sin
    out = jnp.concatenate([first_part, second_part], axis=-1).astype(inputs.dtype)
    return jnp.concatenate([out, rest], axis=-1)


def apply(x, positions, spec):
    """rope.apply for every tensor layout posref hands over: [b, s, h, d], [b, h, s, d], [t, h, d]."""
    if spec.layout != "half":
        raise Unsupported("MaxText's RotaryEmbedding splits the features into halves: half layout only")
    if getattr(spec, "inplace", False):
        raise Unsupported("JAX arrays are immutable: no in-place rotation")
    layout = getattr(spec, "tensor_layout", "bshd")
    if layout == "bhsd":
        sin, cos = _sinusoid(positions, spec)
        return jnp.swapaxes(_rotate(jnp.swapaxes(x, 1, 2), sin, cos, spec), 1, 2)
    if layout == "thd":
        sin, cos = _sinusoid(positions[None], spec)
        return _rotate(x[None], sin, cos, spec)[0]
    sin, cos = _sinusoid(positions, spec)
    return _rotate(x, sin, cos, spec)


def apply_qk(q, k, positions, spec):
    return apply(q, positions, spec), apply(k, positions, spec)


@functools.partial(jax.jit, static_argnums=2)
def _apply_jitted(x, positions, spec):
    return apply(x, positions, spec)


def apply_jit(x, positions, spec):
    """``apply`` compiled by jax.jit (RopeSpec is hashable only without a scaling dict)."""
    if spec.scaling or getattr(spec, "tensor_layout", "bshd") != "bshd" or spec.layout != "half" \
            or getattr(spec, "inplace", False):
        return apply(x, positions, spec)
    return _apply_jitted(x, positions, spec)
