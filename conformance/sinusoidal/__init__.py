"""Conformance for sinusoidal position tables (Vaswani, tensor2tensor, fairseq, Transformer-XL,
MAE 2-D).

Protocol ``sinusoidal.table`` (table.py): ``fn(positions, spec)`` returns the table rows
[n, d_model]; ``spec`` is a :class:`SinusoidalSpec` (spec.py). Budgets in budgets.py (derived in
docs/tolerance.md), mutants in diagnosis.py, black-box checks in blackbox.py.
"""

from conformance.core.family import Family
from conformance.sinusoidal.spec import SinusoidalSpec

FAMILY = Family(
    name="sinusoidal",
    protocols=("table",),
    codes={
        "variant-swapped": "the other sin/cos layout: interleaved (sin, cos, sin, cos, ...) where the "
                           "case is [sin | cos] halves, or the reverse",
        "block-order": "the right sin and cos columns in another block order: [cos | sin], or a 2-D table's "
                       "[sin(x) | sin(y) | cos(x) | cos(y)] (timm's build_sincos2d_pos_embed) where the case is "
                       "[sin(x) | cos(x) | sin(y) | cos(y)] (MAE)",
        # Shared with RoPE, same meaning (here of the table's frequencies w_i = base**(-e_i)).
        "wrong-base": "theta_i computed with another base",
        "frequency-exponent": "the exponent of theta_i is wrong (base**(-i/d), 1-based index, ...)",
        "angle-precision": "angles, positions or frequencies kept in bfloat16 or float16",
        "position-offset": "positions shifted by a constant",
    },
    exports={"SinusoidalSpec": "conformance.sinusoidal.spec:SinusoidalSpec"},
)

__all__ = ["FAMILY", "SinusoidalSpec"]
