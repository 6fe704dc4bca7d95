"""diffusers' Flux RoPE (``FluxPosEmbed`` with two axes of d/2 + ``apply_rotary_emb``,
examples/rope2d/lib_diffusers_flux.py) graded as axial 2-D RoPE over three seeds in float32 and
bfloat16: every interleaved axial case passes (CLS tokens as Flux's zero text ids), the half
layout and RoPE-Mixed are skipped on the adapter's word. Skips without diffusers (the ``test``
extra)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("diffusers")

from conformance import run_conformance  # noqa: E402
from support import passing_cases  # noqa: E402

TARGET = f"{Path(__file__).resolve().parents[2] / 'examples' / 'rope2d' / 'lib_diffusers_flux.py'}:apply"


@pytest.mark.parametrize("seed", range(3))
def test_flux_rope_is_axial_2d_rope_in_the_interleaved_layout(seed):
    from reference.golden import store
    from reference.golden.fresh import fresh_cases

    report = run_conformance(TARGET, "rope2d.apply", seed=seed, dtypes=("float32", "bfloat16"))
    passing_cases(report)
    params = {c.id: c.params for c in list(store.iter_cases("rope2d.apply")) + list(fresh_cases("rope2d.apply", seed))}
    graded = [c for c in report.cases if c.verdict != "skip"]
    assert len(graded) >= 8 and all(params[c.id]["layout"] == "interleaved" for c in graded)
    assert any(params[c.id]["cls_tokens"] > 0 for c in graded), "a case with CLS tokens is graded"
    for c in report.cases:
        p = params[c.id]
        if p["layout"] == "interleaved" and p.get("freqs") is None:
            assert c.verdict != "skip", c.id
