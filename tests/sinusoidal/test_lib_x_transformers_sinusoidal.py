"""x-transformers' ``ScaledSinusoidalEmbedding`` (gain at 1, examples/sinusoidal/lib_x_transformers.py)
graded over three seeds: every [sin | cos], 2i/d case is within the standard budget (float32
angles), the rest skipped on the adapter's word. Skips without x-transformers (the ``test`` extra)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("x_transformers")

from conformance import run_conformance  # noqa: E402
from support import passing_cases  # noqa: E402

LIB = Path(__file__).resolve().parents[2] / "examples" / "sinusoidal" / "lib_x_transformers.py"


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("fn, protocol", [("table", "sinusoidal.table")])
def test_x_transformers_passes(fn, protocol, seed):
    report = run_conformance(f"{LIB}:{fn}", protocol, seed=seed)
    graded = passing_cases(report)
    assert len(graded) >= 4
    skipped = [c for c in report.cases if c.verdict == "skip"]
    reasons = ("[sin | cos] halves only", "exponent 2i/d", "even width")
    assert all(any(w in c.notes[0] for w in reasons) for c in skipped), [c.notes for c in skipped]
