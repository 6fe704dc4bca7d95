"""torchtune's rotate-half RoPE modules (``Phi3RotaryPositionalEmbeddings``,
``Qwen2RotaryPositionalEmbeddings``: examples/rope/lib_torchtune_half.py) graded on rope.apply in
float32 and bfloat16: every half-layout, full-rotary, unscaled case passes (or is acceptable:
float32 angles), the layout is detected as half, and the skips are the adapter's word. Skips
without torchtune or a torchao it can import (the ``test`` extra)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from conformance import run_conformance
from support import detected_layout, passing_cases

LIB = Path(__file__).resolve().parents[2] / "examples" / "rope" / "lib_torchtune_half.py"
REASONS = ("half layout only", "no partial rotary", "implements no scaling", "tabulates cos/sin")


@pytest.fixture(scope="module", autouse=True)
def torchtune():
    try:
        importlib.import_module("torchtune.models.qwen2")
    except ImportError as exc:
        pytest.skip(f"torchtune does not import here: {exc}")


def _grade(fn, seed):
    report = run_conformance(f"{LIB}:{fn}", "rope.apply", seed=seed, dtypes=("float32", "bfloat16"))
    passing_cases(report)
    assert len([c for c in report.cases if c.verdict != "skip"]) >= 40
    assert all(any(r in c.notes[0] for r in REASONS) for c in report.cases if c.verdict == "skip")
    assert detected_layout(report) == "half"


@pytest.mark.parametrize("fn", ["phi3", "qwen2"])
def test_torchtune_rotate_half_modules_pass_on_their_committed_cases(fn):
    """The default selection's check: the committed cases the modules can express, both dtypes."""
    from reference.golden import store

    ids = sorted(c.id for c in store.iter_cases("rope.apply") if c.params.get("layout", "half") == "half"
                 and not c.params.get("scaling") and int(c.params.get("rotary_dim") or c.params["head_dim"])
                 == int(c.params["head_dim"]) and int(c.arrays["positions"].max()) < 2 ** 17)[:12]
    assert len(ids) == 12
    report = run_conformance(f"{LIB}:{fn}", "rope.apply", fresh=False, identities=False, cases=",".join(ids),
                             dtypes=("float32", "bfloat16"))
    assert len(report.cases) == 24 and all(c.verdict in ("pass", "acceptable") for c in report.cases), \
        [(c.id, c.dtype, c.verdict) for c in report.cases if c.verdict not in ("pass", "acceptable")]


@pytest.mark.slow  # about 340 cases in two dtypes per run (30 s here)
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("fn", ["phi3", "qwen2"])
def test_torchtune_rotate_half_modules_pass_more_seeds(fn, seed):
    _grade(fn, seed)
