"""transformers' own ``T5Attention._relative_position_bucket`` (examples/t5/lib_transformers.py)
graded on the t5.bucket catalog and fresh cases over three seeds: every case passes. Skips
without transformers (the ``test`` extra)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("transformers")

from conformance import run_conformance  # noqa: E402

TARGET = f"{Path(__file__).resolve().parents[2] / 'examples' / 't5' / 'lib_transformers.py'}:bucket"


@pytest.mark.parametrize("seed", range(3))
def test_transformers_t5_buckets_pass(seed):
    report = run_conformance(TARGET, "t5.bucket", seed=seed)
    assert report.summary()["overall"] == "pass", [(c.id, c.verdict, [d.code for d in c.diagnoses])
                                                    for c in report.cases if c.verdict != "pass"]
    assert len(report.cases) >= 20 and all(c.verdict == "pass" for c in report.cases)
