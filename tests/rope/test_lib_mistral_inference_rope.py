"""mistral-inference's ``precompute_freqs_cis`` + ``apply_rotary_emb`` (examples/rope/
lib_mistral_inference.py) graded on rope.apply_qk and rope.apply: every interleaved, full-rotary,
unscaled case passes (or is acceptable: float32 angles); the rest, and positions past the dense
table's limit, are skipped on the adapter's word. Skips without mistral_inference (``pip install
--no-deps mistral_inference``)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("mistral_inference.rope")

from conformance import run_conformance  # noqa: E402
from support import passing_cases  # noqa: E402
from support import detected_layout  # noqa: E402

LIB = Path(__file__).resolve().parents[2] / "examples" / "rope" / "lib_mistral_inference.py"
REASONS = ("interleaved layout only", "whole head only", "no scaling", "dense table", "[batch, seq, heads")


def _check(report, minimum):
    passing_cases(report)
    assert len([c for c in report.cases if c.verdict != "skip"]) >= minimum
    assert all(any(r in c.notes[0] for r in REASONS) for c in report.cases if c.verdict == "skip")
    assert detected_layout(report) == "interleaved"


@pytest.mark.parametrize("seed", range(3))
def test_mistral_inference_apply_qk(seed):
    _check(run_conformance(f"{LIB}:apply_qk", "rope.apply_qk", seed=seed, dtypes=("float32", "bfloat16")), 6)


@pytest.mark.slow  # about 340 cases, most skipped; the dense tables up to 2^18 rows (40 s here)
def test_mistral_inference_apply():
    _check(run_conformance(f"{LIB}:apply", "rope.apply", seed=0, dtypes=("float32", "bfloat16")), 30)
