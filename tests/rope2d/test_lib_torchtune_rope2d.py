"""torchtune's ``VisionRotaryPositionalEmbeddings`` (examples/rope2d/lib_torchtune.py) graded as
axial 2-D RoPE over three seeds: torchtune counts patch coordinates from 1 (Meta's Llama 3.2 vision
convention), so every interleaved axial case it is built for fails named ``coordinate-offset`` and
nothing else; the half layout, RoPE-Mixed and tiles past the limit are skipped on the adapter's
word. Skips without torchtune or a torchao it can import (the ``test`` extra)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from conformance import run_conformance

TARGET = f"{Path(__file__).resolve().parents[2] / 'examples' / 'rope2d' / 'lib_torchtune.py'}:vision"


@pytest.fixture(scope="module", autouse=True)
def torchtune():
    try:
        importlib.import_module("torchtune.modules")
    except ImportError as exc:
        pytest.skip(f"torchtune does not import here: {exc}")


@pytest.mark.parametrize("seed", range(3))
def test_torchtune_vision_rope_is_diagnosed_as_counting_from_one(seed):
    from reference.golden import store
    from reference.golden.fresh import fresh_cases

    report = run_conformance(TARGET, "rope2d.apply", seed=seed, dtypes=("float32", "bfloat16"))
    params = {c.id: c.params for c in list(store.iter_cases("rope2d.apply")) + list(fresh_cases("rope2d.apply", seed))}
    graded = [c for c in report.cases if c.verdict != "skip"]
    assert len(graded) >= 8 and not [c for c in graded if c.verdict == "error"]
    assert all(c.verdict == "fail" and [d.code for d in c.diagnoses] == ["coordinate-offset"] for c in graded), \
        [(c.id, c.verdict, [d.code for d in c.diagnoses]) for c in graded]
    for c in report.cases:
        p = params[c.id]
        if c.verdict == "skip" and p["layout"] == "interleaved" and p.get("freqs") is None:
            assert "patch tile" in c.notes[0], c.id
