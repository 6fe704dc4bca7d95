"""Conformance for FIRE: protocol ``fire.bias`` (bias.py).

The adapter gets the module's weights as a dict of tensors in the dtype under test (``c`` and
``L_multiplier`` 0-d, ``W1`` [hidden, 1], ``b1`` [hidden], ``W2`` [num_heads, hidden], ``b2``
[num_heads]) and a :class:`FireSpec` (num_heads, hidden, init_L, eps, causal).
"""

from conformance.core.family import Family
from conformance.fire.spec import FireSpec

FAMILY = Family(
    name="fire",
    protocols=("bias",),
    codes={
        "fire-threshold-missing": "the normalizer is psi(i) instead of psi(max(i, L)): no progressive "
                                  "interpolation for queries below the threshold L",
        "fire-plus-one-missing": "psi(x) = log(|c x|) without the + 1: -inf at distance 0 and a different "
                                 "feature everywhere",
        "fire-one-based-positions": "positions counted from 1: the normalizer uses psi(max(i + 1, L))",
    },
    exports={"FireSpec": "conformance.fire.spec:FireSpec"},
)

__all__ = ["FAMILY", "FireSpec"]
