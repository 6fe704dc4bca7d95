"""rotary-embedding-torch's axial recipe (``RotaryEmbedding(dim=d/2).get_axial_freqs`` +
``apply_rotary_emb``, examples/rope2d/lib_rotary_embedding_torch.py) graded as axial 2-D RoPE over
three seeds in float32 and bfloat16: every interleaved axial case within the dense grid's limit
passes (or is acceptable: float32 angles); the half layout, RoPE-Mixed and grids past the limit are
skipped on the adapter's word. Skips without rotary-embedding-torch (the ``test`` extra)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("rotary_embedding_torch")

from conformance import run_conformance  # noqa: E402
from support import passing_cases  # noqa: E402

TARGET = f"{Path(__file__).resolve().parents[2] / 'examples' / 'rope2d' / 'lib_rotary_embedding_torch.py'}:apply"


@pytest.mark.parametrize("seed", range(3))
def test_axial_recipe_is_axial_2d_rope_in_the_interleaved_layout(seed):
    from reference.golden import store
    from reference.golden.fresh import fresh_cases

    report = run_conformance(TARGET, "rope2d.apply", seed=seed, dtypes=("float32", "bfloat16"))
    passing_cases(report)
    params = {c.id: c.params for c in list(store.iter_cases("rope2d.apply")) + list(fresh_cases("rope2d.apply", seed))}
    graded = [c for c in report.cases if c.verdict != "skip"]
    assert len(graded) >= 8 and any(params[c.id]["cls_tokens"] > 0 for c in graded)
    for c in report.cases:
        p = params[c.id]
        if p["layout"] == "interleaved" and p.get("freqs") is None and c.verdict == "skip":
            assert "dense axial grid" in c.notes[0], c.id
