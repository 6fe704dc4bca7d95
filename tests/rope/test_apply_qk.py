"""rope.apply_qk: fused q and k with grouped-query head counts (issue 14)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from conformance import run_conformance  # noqa: E402
from conformance.core import registry  # noqa: E402
from reference import rope as rr  # noqa: E402
from reference.golden import store  # noqa: E402
from reference.golden.fresh import fresh_cases  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
HF = f"{ROOT / 'examples' / 'rope' / 'hf_rotate_half.py'}:apply_qk"
K_BUG = f"{ROOT / 'examples' / 'rope' / 'buggy' / 'k_unrotated.py'}:apply_qk"


def test_protocol_is_registered_with_its_signature():
    proto = registry.get("rope.apply_qk")
    assert proto.signature == "fn(q, k, positions, spec) -> (q_rot, k_rot)" and proto.arity == 4
    assert "k-unrotated" in registry.families()["rope"].codes


def test_vectors_hold_grouped_query_cases_down_to_one_kv_head():
    cases = list(store.iter_cases("rope.apply_qk"))
    assert cases
    kv = {c.arrays["k"].shape[2] for c in cases}
    assert 1 in kv and all(c.arrays["q"].shape[2] > c.arrays["k"].shape[2] for c in cases)
    for c in cases:
        p = c.params
        for role in ("q", "k"):
            want = rr.apply(c.arrays[role], c.arrays["positions"], rotary_dim=p["rotary_dim"], base=p["base"],
                            layout=p["layout"])
            np.testing.assert_allclose(c.arrays[f"{role}_expected"], want, rtol=0, atol=1e-12)


def test_fresh_qk_case_is_drawn():
    (case,) = fresh_cases("rope.apply_qk", 4)
    assert case.arrays["q"].shape[2] in (4, 8) and case.arrays["k"].shape[2] in (1, 2)


def test_correct_example_passes():
    report = run_conformance(HF, "rope.apply_qk", seed=1)
    s = report.summary()
    assert s["overall"] == "pass" and s["pass"] + s["acceptable"] >= 6
    graded = [c for c in report.cases if c.verdict != "skip"]
    assert all(c.worst_location.startswith(("q: ", "k: ")) for c in graded)


def test_k_unrotated_at_one_kv_head():
    report = run_conformance(K_BUG, "rope.apply_qk", dtypes=("float32",), seed=1)
    failing = [c for c in report.cases if c.verdict == "fail"]
    assert failing and all(c.worst_location.startswith("k: ") for c in failing)
    assert {d.code for c in failing for d in c.diagnoses} == {"k-unrotated"}
    # two KV heads: the kernel is right there
    ok = [c for c in report.cases if c.id.endswith("/prefill-gqa4") and c.verdict != "skip"]
    assert ok and all(c.verdict in ("pass", "acceptable") for c in ok)


def test_wrong_return_values_are_named():
    def single(q, k, positions, spec):
        return q

    report = run_conformance(single, "rope.apply_qk", dtypes=("float32",), fresh=False,
                             cases="rope.apply_qk/llama3-d128/*")
    assert {c.verdict for c in report.cases} == {"fail"}
    assert all("(q_rot, k_rot)" in c.diagnoses[0].message for c in report.cases)


def test_q_bug_is_diagnosed_as_a_rope_apply_output():
    def reversed_q(q, k, positions, spec):
        from examples.rope import hf_rotate_half as hf  # noqa: F401 - importable package

        q_rot, k_rot = hf.apply_qk(q, k, positions, spec)
        return hf.apply_qk(q, k, -positions, spec)[0], k_rot

    report = run_conformance(reversed_q, "rope.apply_qk", dtypes=("float32",), fresh=False,
                             cases="rope.apply_qk/llama3-d128/left-padded-mqa")
    (case,) = report.cases
    assert case.verdict == "fail" and case.diagnoses[0].code == "rotation-reversed"
    assert case.diagnoses[0].message.startswith("q: ")
