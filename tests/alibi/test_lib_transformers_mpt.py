"""transformers' MPT ALiBi (``build_mpt_alibi_tensor``, examples/alibi/lib_transformers_mpt.py)
graded on the catalog and fresh cases over three seeds: the slopes at every head count and the
causal bias pass; the bidirectional cases are skipped on the adapter's own word. Skips without
transformers (the ``test`` extra)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("transformers")

from conformance import run_conformance  # noqa: E402

LIB = Path(__file__).resolve().parents[2] / "examples" / "alibi" / "lib_transformers_mpt.py"


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("fn, protocol", [("slopes", "alibi.slopes"), ("bias", "alibi.bias")])
def test_mpt_alibi_passes(fn, protocol, seed):
    report = run_conformance(f"{LIB}:{fn}", protocol, seed=seed)
    assert report.summary()["overall"] == "pass", [(c.id, c.verdict, [d.code for d in c.diagnoses])
                                                    for c in report.cases if c.verdict not in ("pass", "skip")]
    graded = [c for c in report.cases if c.verdict != "skip"]
    assert len(graded) >= 10 and all(c.verdict == "pass" for c in graded)
    skipped = [c for c in report.cases if c.verdict == "skip"]
    assert all("causal form only" in c.notes[0] for c in skipped)


def test_mpt_slopes_at_a_head_count_that_is_not_a_power_of_two():
    """12 heads: the odd-indexed steps of the 16-head series first, then the even ones (Press et
    al.'s rule) -- the case the catalog may not draw on every seed."""
    from conformance.alibi.spec import AlibiSpec
    from reference import alibi
    from support import load_file

    mpt = load_file(LIB)
    got = mpt.slopes(AlibiSpec(12)).double().numpy()
    assert abs(got - alibi.slopes(12, mode="golden")).max() < 1e-6
