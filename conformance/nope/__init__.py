"""Conformance for NoPE layers: protocol ``nope.apply`` (apply.py), ``fn(x, positions, spec)``
returning x unchanged. ``spec`` is a :class:`NopeSpec` (head_dim)."""

from conformance.core.family import Family
from conformance.nope.spec import NopeSpec

FAMILY = Family(
    name="nope",
    protocols=("apply",),
    codes={
        "nope-rope-applied": "pairs turned by a rotation in a layer that takes no positional encoding",
        "nope-position-added": "a position-dependent vector added to x in a layer that takes no positional encoding",
    },
    exports={"NopeSpec": "conformance.nope.spec:NopeSpec"},
)

__all__ = ["FAMILY", "NopeSpec"]
