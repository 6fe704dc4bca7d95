"""x-transformers' ``AbsolutePositionalEmbedding`` added to x (examples/learned/lib_x_transformers.py)
graded over three seeds in float32 and bfloat16: every absolute case passes, the length walls
included; RoBERTa's cases are skipped on the adapter's word. Skips without x-transformers (the
``test`` extra)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("x_transformers")

from conformance import run_conformance  # noqa: E402
from support import passing_cases  # noqa: E402

LIB = Path(__file__).resolve().parents[2] / "examples" / "learned" / "lib_x_transformers.py"


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("fn, protocol", [("lookup", "learned.lookup")])
def test_x_transformers_passes(fn, protocol, seed):
    report = run_conformance(f"{LIB}:{fn}", protocol, seed=seed, dtypes=("float32", "bfloat16"))
    graded = passing_cases(report)
    assert len(graded) >= 10
    skipped = [c for c in report.cases if c.verdict == "skip"]
    assert all(any(w in c.notes[0] for w in ("variant absolute",)) for c in skipped), [c.notes for c in skipped]
