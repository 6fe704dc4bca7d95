"""T5 buckets (issue 12, part): the exact rule, HF's implementation, the edge acceptance and the
diagnoses."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from conformance import run_conformance
from reference import t5
from reference.identities import load_all, run_identities
from reference.t5 import oracle

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "t5"
R = np.arange(-3000, 3001)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_exact_rule_matches_the_oracle_and_the_edges(bidirectional):
    ours = t5.bucket(R, bidirectional=bidirectional)
    assert np.array_equal(ours, np.array(oracle.bucket_exact(R, 32, 128, bidirectional), dtype=np.int64))
    assert t5.edges(bidirectional=True) == [16, 32, 64] and t5.edges(bidirectional=False) == []


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers is not installed")
@pytest.mark.parametrize("bidirectional", [True, False])
def test_hugging_face_agrees(bidirectional):
    from transformers.models.t5.modeling_t5 import T5Attention

    hf = T5Attention._relative_position_bucket(torch.tensor(R), bidirectional=bidirectional).numpy()
    assert np.array_equal(hf, t5.bucket(R, bidirectional=bidirectional))


def test_identities_hold():
    load_all()
    assert all(r["verdict"] == "holds" for r in run_identities("t5"))


def test_one_bucket_low_at_an_edge_is_acceptable_and_said():
    def low_at_edges(relative_positions, spec):
        r = relative_positions.numpy()
        out = t5.bucket(r, num_buckets=spec.num_buckets, max_distance=spec.max_distance,
                        bidirectional=spec.bidirectional)
        n = np.abs(r) if spec.bidirectional else np.maximum(-r, 0)
        return torch.from_numpy(np.where(np.isin(n, [16, 32, 64]) & (n >= 16), out - 1, out))

    report = run_conformance(low_at_edges, "t5.bucket", fresh=False, identities=False,
                             cases="t5.bucket/t5-encoder/edges")
    case = report.cases[0]
    assert case.verdict == "acceptable" and any("the exact log position is an integer" in n for n in case.notes)
    strict = run_conformance(low_at_edges, "t5.bucket", fresh=False, identities=False, profile="strict",
                             cases="t5.bucket/t5-encoder/edges")
    assert strict.cases[0].verdict == "fail"


@pytest.mark.parametrize("name, code", [("direction_swapped", "bucket-direction"),
                                        ("causal_flag_swapped", "bucket-causal-flag"),
                                        ("not_halved", "bucket-not-halved"),
                                        ("half_precision_log", "bucket-log-precision")])
def test_mistakes_are_named(name, code):
    report = run_conformance(f"{EXAMPLES / 'buggy' / name}.py:bucket", "t5.bucket", fresh=False, timeout=60.0)
    failing = [c for c in report.cases if c.verdict == "fail"]
    assert failing and all([d.code for d in c.diagnoses] == [code] for c in failing)


def test_hf_style_example_passes():
    report = run_conformance(f"{EXAMPLES / 'hf_t5.py'}:bucket", "t5.bucket", seed=9, timeout=60.0)
    assert report.summary()["overall"] == "pass"
