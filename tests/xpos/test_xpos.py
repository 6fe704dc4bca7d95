"""xPos (issue 11): the reference and its certified values, the identities, grading up to a common
centring (the centring found is reported), and the diagnoses."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from conformance import run_conformance
from reference import xpos
from reference.golden.certify import nearest_double
from reference.identities import load_all, run_identities
from reference.xpos import oracle

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "xpos"


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_golden_is_correctly_rounded_overflow_range_included(layout):
    rng = np.random.default_rng(5)
    q, k = rng.standard_normal((1, 3, 1, 12)), rng.standard_normal((1, 3, 1, 12))
    pos = np.array([[0, 700, 40000]])
    qo, ko = xpos.apply(q, k, pos, rotary_dim=8, layout=layout, mode="golden", centre=3.0)
    qe, ke = oracle.apply_exact(q, k, pos, 8, 1e4, layout, 512.0, 0.4, 3.0)
    for got, exact in ((qo, qe), (ko, ke)):
        assert [nearest_double(e) for e in exact.reshape(-1)] == got.reshape(-1).tolist()
    assert np.array_equal(qo[..., 8:], q[..., 8:]) and np.max(np.abs(ko)) > 1e40  # tail as is; 3e42 scales


def test_zeta_matches_the_formula_and_bad_parameters_are_refused():
    assert np.allclose(xpos.zeta(64), (np.arange(0, 64, 2) + 0.4 * 64) / (1.4 * 64), rtol=2**-52)
    with pytest.raises(ValueError, match="scale_base"):
        xpos.apply(np.ones((1, 1, 1, 4)), np.ones((1, 1, 1, 4)), np.zeros((1, 1), int), scale_base=0.0)


def test_identities_hold():
    load_all()
    rows = run_identities("xpos")
    assert {r["id"] for r in rows} == {"xpos.logit-depends-on-distance", "xpos.logit-decays", "xpos.centring-cancels",
                                       "xpos.backward-adjoint"}
    assert all(r["verdict"] == "holds" for r in rows)


def _grade(name, **options):
    return run_conformance(f"{EXAMPLES / name}:apply", "xpos.apply", timeout=60.0, **options)


def test_a_correct_implementation_with_its_own_centring_passes_and_the_centring_is_reported():
    report = _grade("torchscale_style.py", dtypes=("float32", "bfloat16"), seed=2)
    assert report.summary()["overall"] == "pass"
    large = next(c for c in report.cases if c.id.endswith("large-40000") and c.dtype == "float32")
    assert any("centring c = 40002 found" in n for n in large.notes)


@pytest.mark.parametrize("name, code, words", [
    ("buggy/same_direction.py", "scale-direction", "like the query"),
    ("buggy/wrong_gamma.py", "scale-parameters", "gamma 0.5 used instead of 0.4"),
    ("buggy/uncentred.py", "centring-missing", "without centring exceeds float32"),
])
def test_buggy_examples_are_diagnosed(name, code, words):
    report = _grade(name, dtypes=("float32",), fresh=False)
    found = {(d.code, d.message) for c in report.cases if c.verdict == "fail" for d in c.diagnoses}
    assert any(c == code and words in m for c, m in found), found


def test_the_uncentred_implementation_passes_where_nothing_overflows():
    report = _grade("buggy/uncentred.py", dtypes=("float32",), fresh=False)
    failing = {c.id for c in report.cases if c.verdict == "fail"}
    assert failing == {"xpos.apply/torchscale-d64/large-40000"}


@pytest.mark.skipif(importlib.util.find_spec("rotary_embedding_torch") is None,
                    reason="rotary-embedding-torch is not installed")
def test_rotary_embedding_torch_xpos_passes_what_it_supports():
    report = _grade("lib_rotary_embedding_torch.py", dtypes=("float32",), fresh=False)
    assert report.summary()["overall"] == "pass"
    graded = {c.id for c in report.cases if c.verdict in ("pass", "acceptable")}
    assert "xpos.apply/torchscale-d64/prefill-16" in graded  # its centring len // 2, found and graded
