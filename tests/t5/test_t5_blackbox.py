"""t5.bucket's black-box checks (conformance/t5/blackbox.py, issue 24): properties of every T5
bucket function on relative positions drawn at run time, so that an adapter that only looks
answers up (in the shipped vectors, or in the runner's memory) fails them."""

from __future__ import annotations


import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from conformance import run_conformance
from conformance.isolation import make_invoker
from conformance.t5 import blackbox
from conformance.t5.spec import T5Spec
from reference import t5
from reference.golden import store
from support import load_file

ROOT = Path(__file__).resolve().parents[2]
HF = load_file(ROOT / "examples" / "t5" / "hf_t5.py")


def _checks(fn, seed):
    with make_invoker(fn, None, isolate=False, timeout=None) as inv:
        return {r.id: r for r in blackbox.bucket_checks(inv, "cpu", seed=seed)}


def _reference(relative_positions, spec):
    out = t5.bucket(relative_positions.numpy(), num_buckets=spec.num_buckets, max_distance=spec.max_distance,
                    bidirectional=spec.bidirectional)
    return torch.from_numpy(out)


@pytest.mark.parametrize("seed", range(6))
def test_correct_implementations_pass_on_every_draw(seed):
    for fn in (HF.bucket, _reference):
        got = _checks(fn, seed)
        assert len(got) == 5 and all(r.verdict == "pass" for r in got.values()), \
            [(r.id, r.message) for r in got.values() if r.verdict != "pass"]


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers is not installed")
@pytest.mark.parametrize("seed", range(4))
def test_hugging_face_passes(seed):
    from transformers.models.t5.modeling_t5 import T5Attention

    def hf(relative_positions, spec):
        return T5Attention._relative_position_bucket(relative_positions, bidirectional=spec.bidirectional,
                                                     num_buckets=spec.num_buckets, max_distance=spec.max_distance)

    assert all(r.verdict == "pass" for r in _checks(hf, seed).values())


def test_a_float_log_one_ulp_low_at_the_edges_keeps_every_property():
    """The properties are exact, yet admit a float log one ulp low where the exact log position is
    an integer (t5.edges): such an answer is one bucket low there, and breaks none of them."""
    lowered = 0
    for _, spec in blackbox.configurations(3):
        found = np.array(t5.edges(num_buckets=spec.num_buckets, max_distance=spec.max_distance,
                                  bidirectional=spec.bidirectional, limit=spec.max_distance), dtype=np.int64)
        r = np.concatenate([blackbox.draw_positions(3, spec), found, -found])
        out = _reference(torch.from_numpy(r), spec).numpy()
        n = np.abs(r) if spec.bidirectional else np.maximum(-r, 0)
        low = np.where(np.isin(n, found), out - 1, out)
        lowered += int((low != out).sum())
        assert blackbox.violations(r, low, spec) == []
    assert lowered > 0  # the edges were reached: some answers were one bucket low


@pytest.mark.parametrize("name", ["clamp_missing", "direction_swapped", "causal_flag_swapped", "not_halved"])
def test_buggy_examples_fail_the_properties(name):
    module = load_file(ROOT / "examples" / "t5" / "buggy" / f"{name}.py")
    got = _checks(module.bucket, 11)
    assert any(r.verdict == "fail" for k, r in got.items() if "bucket-properties" in k)
    if name == "clamp_missing":
        assert any(d.code == "bucket-clamp-missing" for r in got.values() for d in r.diagnoses)


def test_an_adapter_that_only_looks_answers_up_fails_the_properties():
    # Answers the shipped cases from the vectors; zeros for positions it has not seen.
    known = {}
    for case in store.iter_cases("t5.bucket"):
        r = np.asarray(case.arrays["relative_positions"])
        known[(r.tobytes(), case.params["bidirectional"])] = np.asarray(case.arrays["expected"])

    def lookup(relative_positions, spec):
        r = relative_positions.numpy()
        found = known.get((r.tobytes(), spec.bidirectional))
        return torch.from_numpy(np.array(found if found is not None else np.zeros_like(r), dtype=np.int64))

    report = run_conformance(lookup, "t5.bucket", fresh=False)
    assert all(c.verdict in ("pass", "acceptable") for c in report.cases)  # the files alone pass
    props = [i for i in report.identities if "bucket-properties" in i.id]
    assert len(props) == 3 and all(i.verdict == "fail" for i in props)
    assert report.summary()["overall"] != "pass"


def test_drawn_positions_cover_the_exact_region_the_log_region_and_past_max_distance():
    spec = T5Spec(32, 128, True)
    r = blackbox.draw_positions(5, spec)
    n = np.abs(r)
    assert set(range(-10, 11)) <= set(r.tolist())
    assert np.any((n >= 8) & (n < 128)) and np.any(n >= 128) and np.any(r > 0) and np.any(r < 0)
    assert not np.array_equal(r, blackbox.draw_positions(6, spec))


def test_the_identities_are_in_every_report_format(tmp_path):
    # The adapter gets int64 positions; the identities carry the run's dtype, as the report
    # schema requires (an "int64" identity failed the JSON report's validation).
    import json

    from conformance.reports import write_reports

    report = run_conformance(HF.bucket, "t5.bucket", fresh=False, cases="t5.bucket/t5-encoder/*")
    assert report.summary()["overall"] == "pass"
    paths = {k: tmp_path / f"r.{k}" for k in ("json", "junit", "markdown")}
    write_reports(report, json=str(paths["json"]), junit=str(paths["junit"]), markdown=str(paths["markdown"]))
    ids = [i["id"] for i in json.loads(paths["json"].read_text())["identities"]]
    assert "t5.bucket/bucket-properties-encoder" in ids and "t5.bucket/bucket-properties-drawn" in ids
