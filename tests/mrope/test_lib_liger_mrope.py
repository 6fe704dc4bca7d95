"""Liger Kernel's Triton M-RoPE for Qwen2-VL (examples/mrope/lib_liger.py), graded on a CPU through
Triton's interpreter (--triton-interpret): forward, and backward under --grad, on the committed
mrope.apply cases in float32 (the interpreter cannot compute in bfloat16). Liger implements
Qwen2-VL's consecutive sections in the half layout over the whole head: the rest is its own
Unsupported. Skips, with the reason, where triton or liger-kernel is not installed.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("torch")

from conformance import run_conformance  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TARGET = f"{ROOT / 'examples' / 'mrope' / 'lib_liger.py'}:apply"


@pytest.fixture
def interpreter(monkeypatch):
    for module, dist in (("triton", "triton"), ("liger_kernel", "liger-kernel")):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{dist} is not installed (pip install -e '.[test]')")
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # undone after the test


def _liger_supports(params) -> bool:
    return (params["layout"] == "half" and params["variant"] == "qwen2"
            and int(params["rotary_dim"]) == int(params["head_dim"]))


@pytest.mark.parametrize("grad", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["forward", "backward"])
def test_liger_mrope_through_the_interpreter(interpreter, grad):
    from reference.golden import store

    stored = {c.id: c for c in store.iter_cases("mrope.apply")}
    params = {i: c.params for i, c in stored.items()}
    report = run_conformance(TARGET, "mrope.apply", triton_interpret=True, fresh=False, identities=False, grad=grad)
    assert report.triton_interpret["interpreted"] == ["liger_kernel.ops.qwen2vl_mrope._triton_qwen2vl_mrope"]
    graded = 0
    for c in report.cases:
        if not _liger_supports(params[c.id]):
            assert c.verdict == "skip" and "qwen2" in c.notes[0], (c.id, c.verdict, c.notes)
            continue
        graded += 1
        if stored[c.id].arrays["x"].shape[1] == 1:  # one token: Liger rotates the caller's x in place
            assert c.verdict == "fail" and [d.code for d in c.diagnoses] == ["input-mutated"], (c.id, c.diagnoses)
            continue
        assert c.verdict in ("pass", "acceptable"), (c.id, c.verdict, [d.message for d in c.diagnoses])
        if grad:
            assert c.grad["verdict"] in ("pass", "acceptable") and "x" in c.grad["inputs"], c.grad
    assert graded >= 2, "no Qwen2-VL case graded"
