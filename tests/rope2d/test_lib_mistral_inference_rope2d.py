"""mistral-inference's Pixtral RoPE (``precompute_freqs_cis_2d`` + ``apply_rotary_emb``,
examples/rope2d/lib_mistral_inference.py) graded as axial 2-D RoPE over three seeds: its
convention splits one ladder between the axes (the columns on theta^(-(4k+2)/d)), so every failing
case is named ``ladder-split`` and nothing else, and the cases whose second-axis coordinates are
all 0 (where the split cannot show) pass; the skips are the half layout, RoPE-Mixed and
coordinates past the dense table's limit. Skips without mistral_inference (``pip install --no-deps
mistral_inference``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mistral_inference.rope")

from conformance import run_conformance  # noqa: E402

TARGET = f"{Path(__file__).resolve().parents[2] / 'examples' / 'rope2d' / 'lib_mistral_inference.py'}:pixtral"


@pytest.mark.parametrize("seed", range(3))
def test_pixtral_rope_is_diagnosed_as_the_split_ladder(seed):
    from reference.golden import store
    from reference.golden.fresh import fresh_cases

    report = run_conformance(TARGET, "rope2d.apply", seed=seed, dtypes=("float32", "bfloat16"))
    cases = {c.id: c for c in list(store.iter_cases("rope2d.apply")) + list(fresh_cases("rope2d.apply", seed))}
    failed = [c for c in report.cases if c.verdict == "fail"]
    assert failed and report.summary()["overall"] == "fail"
    assert all([d.code for d in c.diagnoses] == ["ladder-split"] for c in failed), \
        [(c.id, [d.code for d in c.diagnoses]) for c in failed]
    assert not [c for c in report.cases if c.verdict == "error"]
    for c in report.cases:
        case = cases[c.id]
        p = case.params
        if c.verdict == "skip":
            assert p["layout"] != "interleaved" or p.get("freqs") is not None or "dense table" in c.notes[0], c.id
            continue
        second = 0 if tuple(p["order"]) == ("x", "y") else 1  # the coordinate on the odd steps
        if not np.any(case.arrays["coords"][:, p["cls_tokens"]:, 1 - second]):
            assert c.verdict in ("pass", "acceptable"), (c.id, c.verdict)
