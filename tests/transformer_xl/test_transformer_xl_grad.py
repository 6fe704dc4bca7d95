"""--grad on transformer_xl.score: the correct example's gradients within budget in every dtype,
the masked entries left out of the cotangent, the buggy backward named, each diagnosis candidate
recognised, gradcheck."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from conformance import run_conformance
from conformance.transformer_xl import backward
from conformance.transformer_xl.score import PROTOCOL
from reference.golden import store
from reference.transformer_xl import backward as reference_backward
from support import load_file

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "transformer_xl"
CORRECT = f"{EXAMPLES / 'mem_transformer_style.py'}:score"
BUG = EXAMPLES / "buggy" / "backward_scale.py"
FEW = "transformer_xl.score/memory/heads4-d8-q3-m5,transformer_xl.score/clamp/*"




def test_the_mem_transformer_style_gradients_pass_in_every_dtype():
    report = run_conformance(CORRECT, "transformer_xl.score", dtypes=("float32", "bfloat16", "float16", "float64"),
                             fresh=False, grad=True)
    assert report.summary()["overall"] == "pass"
    # a model's subgrid cases (transfo-xl-wt103) grade no gradients: the catalog's do
    full = [c for c in report.cases if "transfo-xl-wt103" not in c.id]
    assert len(full) == 6 * 4 and all(c.grad is None for c in report.cases if c not in full)
    for case in full:
        assert set(case.grad["inputs"]) == {"q", "k", "u", "v", "r_weight"}
        for role, entry in case.grad["inputs"].items():
            assert entry["verdict"] in ("pass", "acceptable"), (case.id, case.dtype, role, entry)
            assert 0.0 <= entry["budget_ratio"] <= 1.0 and entry["dtype"] == case.dtype
            assert entry["budget_ratio"] > 0.0 or case.dtype == "float64"  # float64 may be exact
            assert entry["worst_location"].startswith(f"gradient of {role}:")
    (check,) = [i for i in report.identities if i.id == "transformer_xl.score.gradcheck"]
    assert check.verdict == "pass" and check.dtype == "float64"


def unmasked_leftovers(q, k, u, v, r_weight, spec):
    """The reference code without the mask: the relative shift's leftovers stay above the graded
    entries. The cotangent is 0 there, so the gradients are the same."""
    from conformance.loader import load_target

    mem = load_target(CORRECT.rsplit(":", 1)[0] + ":positional_embedding")
    shift = load_target(CORRECT.rsplit(":", 1)[0] + ":rel_shift")
    klen, n_head, d_head = k.shape
    pos_seq = torch.arange(klen - 1, -1, -1.0)
    if spec.clamp_len > 0:
        pos_seq = pos_seq.clamp(max=spec.clamp_len)
    r = torch.nn.functional.linear(mem(pos_seq, spec.d_model).to(q.dtype), r_weight).view(klen, n_head, d_head)
    ac = torch.einsum("ind,jnd->ijn", q + u, k)
    bd = shift(torch.einsum("ind,jnd->ijn", q + v, r))
    return ((ac + bd) / math.sqrt(d_head)).permute(2, 0, 1)


def test_masked_entries_carry_no_cotangent():
    case = next(store.iter_cases("transformer_xl.score"))
    spec = PROTOCOL.spec(case)
    prepared = PROTOCOL.prepare(case, spec, "float32", "cpu")
    (g,) = PROTOCOL.cotangents(case, spec, prepared)
    qlen = prepared.inputs_f64["q"].shape[0]
    graded = backward.mask(qlen, spec.mlen)
    assert g.dtype == torch.float32 and not torch.any(g[:, torch.from_numpy(~graded)])
    assert torch.count_nonzero(g[:, torch.from_numpy(graded)]) > 0
    report = run_conformance(unmasked_leftovers, "transformer_xl.score", dtypes=("float32",), fresh=False,
                             cases=FEW, grad=True, identities=False)
    assert report.summary()["overall"] == "pass"


def test_the_missing_scale_in_a_hand_written_backward_is_named(tmp_path):
    module = load_file(BUG)
    assert module.OPTIONS == {"grad": True} and module.CODE == "backward-scale"
    report = run_conformance(f"{BUG}:score", "transformer_xl.score", dtypes=("float32",), fresh=False, cases=FEW,
                             **module.OPTIONS)
    failing = [c for c in report.cases if c.verdict == "fail"]
    assert failing and len(failing) == len(report.cases)
    for case in failing:
        assert case.budget_ratio <= 1.0 and case.grad["verdict"] == "fail"  # the forward is right
        (diag,) = [d for d in case.diagnoses if d.code == "backward-scale"]
        assert "lacks the scale 1/sqrt(d_head)" in diag.message
    (check,) = [i for i in report.identities if i.id == "transformer_xl.score.gradcheck"]
    assert check.verdict == "fail" and "Jacobian mismatch" in check.message
    from conformance.reports import json_report

    json_report.write(report, tmp_path / "report.json")  # the gradients' worst indices validate too


def detached_r_weight(q, k, u, v, r_weight, spec):
    from conformance.loader import load_target

    return load_target(CORRECT)(q, k, u, v, r_weight.detach(), spec)  # BUG: r_net frozen


def test_a_detached_parameter_is_backward_missing():
    report = run_conformance(detached_r_weight, "transformer_xl.score", dtypes=("float32",), fresh=False,
                             cases=FEW, grad=True, identities=False)
    for case in report.cases:
        assert case.verdict == "fail" and case.grad["inputs"]["q"]["verdict"] == "pass"
        assert any(d.code == "backward-missing" and "r_weight" in d.message for d in case.diagnoses)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_each_candidate_is_recognised_and_the_right_gradient_is_not(dtype):
    """Each wrong gradient the diagnosis knows, handed in as the gradient, gets its code; the
    reference itself passes with ratio 0."""
    case = next(c for c in store.iter_cases("transformer_xl.score") if "no-memory/heads2" in c.id)
    spec = PROTOCOL.spec(case)
    prepared = PROTOCOL.prepare(case, spec, dtype, "cpu")
    inputs = prepared.inputs_f64
    (g,) = PROTOCOL.cotangents(case, spec, prepared)
    G = backward.cotangent_f64(g)
    ref = backward.reference_grads(inputs, G, spec)
    as_grads = lambda d: {r: torch.from_numpy(np.array(d[r])) for r in backward.ROLES}  # noqa: E731
    graded = backward.grade(inputs, G, spec, dtype, "cpu", as_grads(ref))
    assert all(graded[r].ratio["standard"] == 0.0 for r in backward.ROLES)
    for role in backward.ROLES:
        for code, message, cand in backward.candidates(role, inputs, G, spec):
            grads = as_grads({**ref, role: cand})
            graded = backward.grade(inputs, G, spec, dtype, "cpu", grads)
            found = backward.diagnose(inputs, G, spec, dtype, graded)
            # every candidate is outside the budget, in bfloat16 too (sums accumulate in float32)
            assert graded[role].ratio["standard"] > 1.0, (role, message)
            assert [d.code for d in found] == [code], (role, message, found)
    # any other constant multiple: the generic fit
    grads = as_grads({**ref, "q": 1.5 * ref["q"]})
    graded = backward.grade(inputs, G, spec, dtype, "cpu", grads)
    assert graded["q"].ratio["standard"] > 1.0
    found = backward.diagnose(inputs, G, spec, dtype, graded)
    assert [d.code for d in found] == ["backward-scale"] and "1.5 times" in found[0].message


def test_budgets_cover_the_fast_reference_and_scale_with_the_dtype():
    case = next(store.iter_cases("transformer_xl.score"))
    spec = PROTOCOL.spec(case)
    inputs = PROTOCOL.prepare(case, spec, "float32", "cpu").inputs_f64
    G = backward.cotangent_f64(PROTOCOL.cotangents(case, spec, PROTOCOL.prepare(case, spec, "float32", "cpu"))[0])
    fast = reference_backward.score_vjp(G, *(inputs[r] for r in backward.ROLES), mlen=spec.mlen,
                                        d_model=spec.d_model, clamp_len=spec.clamp_len)
    ref = backward.reference_grads(inputs, G, spec)
    b32 = backward.budgets(inputs, G, spec, "float32", "standard")
    b16 = backward.budgets(inputs, G, spec, "bfloat16", "standard")
    strict64 = backward.budgets(inputs, G, spec, "float64", "strict")
    for role in backward.ROLES:
        assert np.all(np.abs(fast[role] - ref[role]) <= strict64[role])
        assert np.all(b16[role] > 10 * b32[role]) and np.all(b32[role] < 1e-3 * (1 + np.abs(ref[role]).max()))
