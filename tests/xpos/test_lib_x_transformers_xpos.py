"""x-transformers' xPos (``RotaryEmbedding(use_xpos=True)`` + ``apply_rotary_pos_emb``,
examples/xpos/lib_x_transformers.py) graded over three seeds in float32 and bfloat16: every
interleaved case passes (or is acceptable: float32 angles), the others are skipped on the adapter's
word. Skips without x-transformers (the ``test`` extra)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("x_transformers")

from conformance import run_conformance  # noqa: E402
from support import passing_cases  # noqa: E402

LIB = Path(__file__).resolve().parents[2] / "examples" / "xpos" / "lib_x_transformers.py"


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("fn, protocol", [("apply", "xpos.apply")])
def test_x_transformers_passes(fn, protocol, seed):
    report = run_conformance(f"{LIB}:{fn}", protocol, seed=seed, dtypes=("float32", "bfloat16"))
    graded = passing_cases(report)
    assert len(graded) >= 8
    skipped = [c for c in report.cases if c.verdict == "skip"]
    reasons = ("interleaved layout only", "gamma at 0.4", "dim 2")
    assert all(any(w in c.notes[0] for w in reasons) for c in skipped), [c.notes for c in skipped]
