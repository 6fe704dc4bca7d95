"""x-transformers' ``RelativePositionBias._relative_position_bucket``
(examples/t5/lib_x_transformers.py) graded on the catalog and fresh cases over three seeds: every
case passes, encoder (causal=False) and decoder. Skips without x-transformers (the ``test`` extra)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("x_transformers")

from conformance import run_conformance  # noqa: E402
from support import passing_cases  # noqa: E402

LIB = Path(__file__).resolve().parents[2] / "examples" / "t5" / "lib_x_transformers.py"


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("fn, protocol", [("bucket", "t5.bucket")])
def test_x_transformers_passes(fn, protocol, seed):
    report = run_conformance(f"{LIB}:{fn}", protocol, seed=seed)
    graded = passing_cases(report)
    assert len(graded) >= 20
    skipped = [c for c in report.cases if c.verdict == "skip"]
    assert all(any(w in c.notes[0] for w in ()) for c in skipped), [c.notes for c in skipped]
