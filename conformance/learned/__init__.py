"""Conformance for learned absolute position embeddings (BERT, GPT-2, RoBERTa).

Protocol ``learned.lookup`` (lookup.py): ``fn(x, positions, table, spec)`` returns x + table[row]
and must raise for any position whose row is outside the table (the hard length wall). ``spec`` is
a :class:`LearnedSpec` (spec.py). The error budget is in budgets.py (derived in docs/tolerance.md),
the shifted-row mutants and the wall descriptions in diagnosis.py, the black-box checks in
blackbox.py. ``--grad`` grades the gradients of x and of the table (backward.py: the scatter-add
of the cotangent over the rows read, with a summation budget).
"""

from conformance.core.family import Family
from conformance.learned.spec import LearnedSpec

FAMILY = Family(
    name="learned",
    protocols=("lookup",),
    codes={
        "length-wall-missing": "a position outside the learned table (at or past its last row, or negative) "
                               "returned a value instead of raising: clamped, wrapped or extended",
        # Shared with RoPE (same code, same meaning): here the rows are shifted, e.g. RoBERTa's
        # padding_idx + 1 missing, or added to a BERT / GPT-2 lookup.
        "position-offset": "positions shifted by a constant",
        # --grad: none of the core backward codes says it (the gradient has neither the wrong scale
        # nor nothing in it: rows read by several tokens keep one token's gradient).
        "backward-overwrite": "the table's gradient is scattered without accumulation: a row read by "
                              "several tokens keeps one token's gradient instead of their sum",
    },
    exports={"LearnedSpec": "conformance.learned.spec:LearnedSpec"},
)

__all__ = ["FAMILY", "LearnedSpec"]
