"""transformers' GPT-2 ``wpe`` (through GPT2Model's embedding output) and RoBERTa's position ids
(``create_position_ids_from_input_ids``) with its position embedding (examples/learned/
lib_transformers.py), graded on the catalog and fresh cases over three seeds in float32 and
bfloat16: everything graded passes, the length walls included; the skips are the adapter's own
word (the other variant; RoBERTa rows that are not a count of real tokens). Skips without
transformers (the ``test`` extra)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("transformers")

from conformance import run_conformance  # noqa: E402

LIB = Path(__file__).resolve().parents[2] / "examples" / "learned" / "lib_transformers.py"
SKIP_REASONS = {"gpt2": ("row = position",), "roberta": ("variant roberta", "consecutive")}


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("fn", ["gpt2", "roberta"])
def test_transformers_learned_positions_pass(fn, seed):
    report = run_conformance(f"{LIB}:{fn}", "learned.lookup", seed=seed, dtypes=("float32", "bfloat16"))
    assert report.summary()["overall"] == "pass", [(c.id, c.dtype, c.verdict, [d.code for d in c.diagnoses])
                                                    for c in report.cases if c.verdict not in ("pass", "skip")]
    graded = [c for c in report.cases if c.verdict != "skip"]
    assert len(graded) >= 10 and all(c.verdict == "pass" for c in graded)
    assert any("wall" in c.id for c in graded), "a length wall is graded"
    skipped = [c for c in report.cases if c.verdict == "skip"]
    assert all(any(r in c.notes[0] for r in SKIP_REASONS[fn]) for c in skipped), [c.notes for c in skipped]
