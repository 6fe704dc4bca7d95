"""Conformance for KERPLE: protocol ``kerple.bias`` (bias.py).

``spec`` is a :class:`KerpleSpec` (variant "log" or "power", r1 and r2 per head as tuples of
floats, causal). The bias is graded exactly (no per-row constant), against the reference after
the code's clamps.
"""

from conformance.core.family import Family
from conformance.kerple.spec import KerpleSpec

FAMILY = Family(
    name="kerple",
    protocols=("bias",),
    codes={
        "kerple-clamp-missing": "the parameters are used as given, without the code's clamps (log: r1, r2 >= 1e-2; "
                                "power: r1 >= 1e-2, r2 in [1e-2, 2])",
        "kerple-variant-swapped": "the other variant's formula: power -r1 |i - j|^r2 for log, or log "
                                  "-r1 log(1 + r2 |i - j|) for power",
        "kerple-sign": "the bias has the wrong sign: it grows with the distance",
    },
    exports={"KerpleSpec": "conformance.kerple.spec:KerpleSpec"},
)

__all__ = ["FAMILY", "KerpleSpec"]
