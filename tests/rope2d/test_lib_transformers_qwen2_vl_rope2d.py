"""transformers' Qwen2-VL vision RoPE (``Qwen2VLVisionRotaryEmbedding`` + ``apply_rotary_pos_emb_vision``,
examples/rope2d/lib_transformers_qwen2_vl.py) graded as axial 2-D RoPE over three seeds in float32
and bfloat16: every half-layout axial case passes (or is acceptable: float32 angles); the
interleaved layout and RoPE-Mixed are skipped on the adapter's word. Skips without
transformers (the ``test`` extra)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("transformers")

from conformance import run_conformance  # noqa: E402
from support import passing_cases  # noqa: E402

TARGET = f"{Path(__file__).resolve().parents[2] / 'examples' / 'rope2d' / 'lib_transformers_qwen2_vl.py'}:apply"


@pytest.mark.parametrize("seed", range(3))
def test_qwen2_vl_vision_rope_is_axial_2d_rope_in_the_half_layout(seed):
    from reference.golden import store
    from reference.golden.fresh import fresh_cases

    report = run_conformance(TARGET, "rope2d.apply", seed=seed, dtypes=("float32", "bfloat16"))
    passing_cases(report)
    params = {c.id: c.params for c in list(store.iter_cases("rope2d.apply")) + list(fresh_cases("rope2d.apply", seed))}
    graded = [c for c in report.cases if c.verdict != "skip"]
    assert len(graded) >= 8
    for c in report.cases:
        p = params[c.id]
        assert (c.verdict == "skip") == (p["layout"] != "half" or p.get("freqs") is not None), c.id
