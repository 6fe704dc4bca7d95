"""Liger Kernel's Triton RoPE (examples/rope/lib_liger.py), graded on a CPU through Triton's
interpreter (--triton-interpret, conformance.triton_interpret): forward, backward under --grad, and
the in-place finding (Liger writes into the caller's tensor where its transpose is already
contiguous: one head, or one token) as ``input-mutated`` with the head and token counts.

Skips, with the reason, where triton or liger-kernel is not installed (the ``test`` extra). The
cases are the committed rope.apply_qk ones (at most [3, 6, 8, 128]) in float32: the interpreter
cannot compute in bfloat16 (conformance.triton_interpret.bfloat16_problem).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("torch")

from conformance import run_conformance  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
QK = f"{ROOT / 'examples' / 'rope' / 'lib_liger.py'}:apply_qk"
APPLY = f"{ROOT / 'examples' / 'rope' / 'lib_liger.py'}:apply"


@pytest.fixture
def interpreter(monkeypatch):
    """TRITON_INTERPRET=1 for this test only (a later test, or the seed sweep, must not find it
    set); skips without triton or liger-kernel."""
    for module, dist in (("triton", "triton"), ("liger_kernel", "liger-kernel")):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{dist} is not installed (pip install -e '.[test]')")
    monkeypatch.setenv("TRITON_INTERPRET", "1")


def _qk_cases():
    from reference.golden import store

    return {c.id: c for c in store.iter_cases("rope.apply_qk")}


def _expected_mutations(case) -> set:
    """The roles Liger writes in place: those whose [b, s, h, d] -> [b, h, s, d] transpose is
    contiguous already (one head, or one token), so that its .contiguous() makes no copy."""
    out = set()
    for role in ("q", "k"):
        _, tokens, heads, _ = case.arrays[role].shape
        if heads == 1 or tokens == 1:
            out.add(role)
    return out


def _mutated(result) -> set:
    return {d.message.split("the input tensor ", 1)[1].split(" ", 1)[0]
            for d in result.diagnoses if d.code == "input-mutated"}


def test_liger_rope_forward_through_the_interpreter(interpreter):
    report = run_conformance(QK, "rope.apply_qk", triton_interpret=True, fresh=False, identities=False)
    info = report.triton_interpret
    assert info["interpreted"] == ["liger_kernel.ops.rope._triton_rope"] and info["launches"] > 0
    assert not [k for k in info["compiled"] if k.startswith("liger_kernel.")] and \
        report.environment["TRITON_INTERPRET"] == "1"
    assert report.environment["dtypes"] == ["float32"]  # bfloat16 left out: the interpreter cannot compute it
    cases = _qk_cases()
    graded = [c for c in report.cases if c.verdict != "skip"]
    assert graded, "no case graded"
    for c in report.cases:
        spec = cases[c.id].params
        if c.verdict == "skip":
            assert spec.get("layout") == "interleaved" or spec.get("scaling"), c.id  # Liger's own limits
            continue
        expected = _expected_mutations(cases[c.id])
        assert _mutated(c) == expected, (c.id, [d.message for d in c.diagnoses])
        # The values are right whether or not the input was written: within the budget.
        assert c.budget_ratio is not None and c.budget_ratio <= 1.0, (c.id, c.budget_ratio)
        if not expected:
            assert c.verdict in ("pass", "acceptable"), (c.id, c.verdict, [d.message for d in c.diagnoses])


def test_liger_one_kv_head_writes_the_callers_k(interpreter):
    """The finding: at kv_heads 1 (multi-query attention) Liger rotates the caller's k in place,
    while q (several heads, several tokens) is copied."""
    cases = _qk_cases()
    mqa = sorted(i for i, c in cases.items() if c.arrays["k"].shape[2] == 1 and c.arrays["q"].shape[2] > 1
                 and c.arrays["q"].shape[1] > 1 and c.params.get("layout", "half") == "half"
                 and not c.params.get("scaling"))
    assert mqa, "the catalog has no multi-query prefill case in the half layout"
    report = run_conformance(QK, "rope.apply_qk", triton_interpret=True, fresh=False, identities=False,
                             cases=mqa[0])
    (result,) = report.cases
    assert result.verdict == "fail"
    messages = [d.message for d in result.diagnoses]
    assert [d.code for d in result.diagnoses] == ["input-mutated"], messages
    heads, tokens = cases[mqa[0]].arrays["q"].shape[2], cases[mqa[0]].arrays["q"].shape[1]
    assert messages == [f"the input tensor k (1 KV head for {heads} query heads, {tokens} tokens) was modified "
                        "in place"]


def test_liger_rope_backward_through_the_interpreter(interpreter):
    """--grad: Liger's own backward kernel; it rotates the incoming gradient in place, which the
    grading must not mistake for a wrong gradient (training.py copies the cotangents)."""
    cases = _qk_cases()
    multi = sorted(i for i, c in cases.items() if not _expected_mutations(c)
                   and c.params.get("layout", "half") == "half" and not c.params.get("scaling"))
    assert multi
    report = run_conformance(QK, "rope.apply_qk", triton_interpret=True, fresh=False, identities=False,
                             grad=True, cases=",".join(multi))
    for c in report.cases:
        assert c.verdict in ("pass", "acceptable"), (c.id, c.verdict, [d.message for d in c.diagnoses])
        assert c.grad["verdict"] in ("pass", "acceptable") and set(c.grad["inputs"]) == {"q", "k"}, c.grad
        assert any("wrote into its incoming gradient" in n for n in c.notes), c.notes


@pytest.mark.slow  # the rope.apply_qk tests cover the same kernel in the default selection
def test_liger_rope_apply_small_shapes(interpreter):
    """rope.apply through Liger (x as its q) on the committed half-layout, unscaled cases of one
    head size: the cases of one head or one token are input-mutated, the others within budget."""
    from reference.golden import store

    ids = sorted(c.id for c in store.iter_cases("rope.apply") if c.params.get("layout", "half") == "half"
                 and not c.params.get("scaling") and c.params.get("head_dim") == 64
                 and c.params.get("tensor_layout", "bshd") == "bshd")[:6]
    assert ids
    report = run_conformance(APPLY, "rope.apply", triton_interpret=True, fresh=False, identities=False,
                             cases=",".join(ids))
    cases = {c.id: c for c in store.iter_cases("rope.apply")}
    for c in report.cases:
        _, tokens, heads, _ = cases[c.id].arrays["x"].shape
        mutated = heads == 1 or tokens == 1
        assert c.budget_ratio is not None and c.budget_ratio <= 1.0, (c.id, c.budget_ratio)
        assert (_mutated(c) == {"x"}) == mutated, (c.id, [d.message for d in c.diagnoses])
        if mutated:
            assert f"{heads} head{'s' if heads != 1 else ''}, {tokens} token" in c.diagnoses[0].message


def test_liger_without_the_interpreter_does_not_import(monkeypatch):
    """On a CPU without --triton-interpret the adapter does not import (its kernels would be
    compiled for a GPU): an ImportError naming the option, which the loader turns into posref's
    one-line usage error."""
    if importlib.util.find_spec("liger_kernel") is None:
        pytest.skip("liger-kernel is not installed (pip install -e '.[test]')")
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: Liger's kernels run compiled")
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    monkeypatch.delenv("TRITON_INTERPRET")
    from support import load_file

    with pytest.raises(ImportError, match="--triton-interpret"):
        load_file(ROOT / "examples" / "rope" / "lib_liger.py")


@pytest.mark.slow  # gradcheck through the interpreter: about 400 kernel launches (20 s here)
def test_liger_gradcheck_failure_names_the_in_place_write(interpreter):
    """The float64 gradcheck identity's input [1, 4, 1, 8] has one head: Liger rotates q and k in
    place, so the finite differences are taken on rotated inputs; the failure says so."""
    report = run_conformance(QK, "rope.apply_qk", triton_interpret=True, fresh=False, grad=True,
                             cases="rope.apply_qk/llama3-d128/prefill-gqa4")
    (check,) = [i for i in report.identities if i.id == "rope.apply_qk.gradcheck"]
    assert check.verdict == "fail" and "writes into its input arguments 0, 1 in place" in check.message
