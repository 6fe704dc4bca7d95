"""FIRE's backward pass (VJP, JVP, features, VJP bound): reference.numerics.bias.fire_backward, shared with the
attention composite; this module re-exports its public names under the family's path."""

from reference.numerics.bias.fire_backward import ROLES, bias_jvp, bias_vjp, features, vjp_bound

__all__ = ["ROLES", "bias_jvp", "bias_vjp", "features", "vjp_bound"]
