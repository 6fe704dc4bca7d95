"""transformer_xl.score at Transformer-XL's full shape (issue 27): the reader
(reference.transformer_xl.model_config), cases grading a subgrid of heads x queries x keys with their
inputs named by seed (reference.transformer_xl.model_cases), the committed group, and the exact
integer W R that makes the golden affordable at d_model 1024."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import mpmath
import numpy as np
import pytest

from conformance import run_conformance
from conformance.model import model_cases, resolve
from reference import transformer_xl, zoo
from reference.golden import catalog, store
from reference.transformer_xl import core, model_config
from reference.transformer_xl import vectors as xl_vectors
from support import assert_config_error

ROOT = Path(__file__).resolve().parents[2]
NAME = "transfo-xl-wt103"
PROTO = catalog.protocol("transformer_xl.score")
CORRECT = ROOT / "examples/transformer_xl/mem_transformer_style.py"


def _config() -> dict:
    return copy.deepcopy(zoo.load(NAME)["config"])


def test_the_record_reads_as_its_full_shape():
    (setting,) = model_config.settings(_config())
    assert setting.params == {"n_head": 16, "d_head": 64, "d_model": 1024, "clamp_len": 1000}
    assert (setting.tgt_len, setting.mem_len) == (128, 1600)
    assert "same_length" in setting.notes[0]


@pytest.mark.parametrize("edit, message", [
    (lambda c: c.update(attn_type=1), "attn_type: 1: only 0"),
    (lambda c: c.pop("n_head"), "n_head: "),
    (lambda c: c.update(d_head=0), "d_head: "),
    (lambda c: c.update(d_model=1023), "d_model: 1023 is odd"),
])
def test_a_field_posref_cannot_read_is_one_error_naming_it(edit, message):
    config = _config()
    edit(config)
    assert_config_error(config, message)


def test_the_committed_group_grades_a_subgrid_of_seeded_inputs():
    cases = {c.test: c for c in store.iter_cases("transformer_xl.score") if c.group == NAME}
    assert set(cases) == {"segment-128-mem-1600", "decode-1-mem-1600"}
    seg = cases["segment-128-mem-1600"]
    assert seg.params["rows"] == [0, 1, 127] and seg.params["heads"] == [0, 15]
    assert {0, 599, 600, 601, 1599, 1600, 1727} <= set(seg.params["keys"])  # max distance, the clamp, memory's end
    assert seg.arrays["expected"].shape == (2, 3, len(seg.params["keys"]))
    assert all(seg.arrays[r].shape == (0,) for r in xl_vectors.INPUTS)  # 22 MB not stored
    inputs = xl_vectors.inputs_of(seg.params, seg.arrays)
    assert inputs["k"].shape == (1728, 16, 64) and inputs["r_weight"].shape == (1024, 1024)
    assert seg.params["inputs_seed"] == seg.id
    assert (store.vectors_dir() / "transformer_xl.score" / f"{NAME}.npz").stat().st_size < 20_000


def test_an_edited_seed_or_digest_is_refused():
    case = store.get_case(f"transformer_xl.score/{NAME}/decode-1-mem-1600")
    for edit in ({"inputs_sha256": "0" * 64}, {"inputs_seed": case.id + "x"}):
        with pytest.raises(ValueError, match="inputs_sha256: inputs_seed .* no longer derives the certified inputs"):
            xl_vectors.inputs_of({**case.params, **edit}, case.arrays)


def test_a_subgrid_is_the_full_golden_at_those_entries():
    case = store.get_case("transformer_xl.score/memory/heads4-d8-q3-m5")
    inputs = [case.arrays[r] for r in xl_vectors.INPUTS]
    config = dict(mlen=5, d_model=32, clamp_len=0)
    sub = transformer_xl.score_entries(*inputs, **config, heads=[3, 1], rows=[2, 0], keys=[7, 0, 4])
    np.testing.assert_array_equal(sub, case.arrays["expected"][np.ix_([3, 1], [2, 0], [7, 0, 4])])
    with pytest.raises(ValueError, match="keys: indices from 0 to 7"):
        transformer_xl.score_entries(*inputs, **config, keys=[8])


def test_the_integer_w_r_is_mpmaths_exact_sum():
    rng = np.random.default_rng(0)
    w = np.ldexp(rng.integers(-2**13, 2**13, size=(6, 40)).astype(float), -15)  # seeded inputs' grid
    odd = w + 2.0**-40  # not on a coarse grid: the mpmath fallback
    with mpmath.workprec(200):
        freq = core.inv_freq_mp(40)  # 20 frequencies: R has 40 columns
        R = [mpmath.sin(7 * f) for f in freq] + [mpmath.cos(7 * f) for f in freq]
        for m in (w, odd):
            fdot = [mpmath.fdot([mpmath.mpf(float(x)) for x in row], R) for row in m]
            assert core._exact_rows(m, R) == fdot
    assert core._integer_scale(w)[0] == 15 and core._integer_scale(odd) is None


def test_model_mode_grades_the_committed_cases_first():
    committed, drawn = model_cases(resolve(NAME), "transformer_xl.score", 3)
    assert {c.test for c in committed} == {"segment-128-mem-1600", "decode-1-mem-1600"}
    assert [c.test for c in drawn] == ["drawn"] and len(drawn[0].params["heads"]) <= 4


def _grade(adapter):
    return run_conformance(adapter, "transformer_xl.score", model=NAME, seed=5, dtypes=("float32",),
                           identities=False)


def test_the_papers_layer_passes_at_the_models_shape():
    report = _grade(f"{CORRECT}:score")
    assert report.summary()["overall"] == "pass", [(c.id, c.verdict) for c in report.cases]
    assert len(report.cases) == 3


def test_a_shift_off_by_one_fails_with_its_code():
    report = _grade(f"{ROOT / 'examples/transformer_xl/buggy/shift_off_by_one.py'}:score")
    assert all(c.verdict == "fail" for c in report.cases)
    assert {d.code for c in report.cases for d in c.diagnoses} == {"xl-shift-off-by-one"}


def _no_clamp(q, k, u, v, r_weight, spec):
    """Bug: clamp_len dropped (R read at every distance up to klen - 1)."""
    from examples.transformer_xl.mem_transformer_style import score

    return score(q, k, u, v, r_weight, dataclasses.replace(spec, clamp_len=0))


def test_a_port_without_the_clamp_fails_the_cases_reaching_past_clamp_len():
    report = _grade(_no_clamp)
    verdicts = {c.id.rsplit("/", 1)[1]: c.verdict for c in report.cases}
    assert verdicts["segment-128-mem-1600"] == verdicts["decode-1-mem-1600"] == "fail"
