"""The sinusoidal table at a model's configuration (issue 27): reference.sinusoidal.model_config.
(Its reading of Transformer-XL's table of distances: tests/transformer_xl/test_model_transformer_xl.py.)

The Transformer base (the zoo's transformer-base-t2t: tensor2tensor's transformer_base_v1) is read as
get_timing_signal_1d builds its table: 512 channels, [sin | cos] halves, timescales 1 .. 10^4
spaced by i / (n - 1). The float32 ports of that rule pass at it; the paper's interleaved layout
(variant-swapped), the paper's 2i/d exponent (frequency-exponent) and a base off by ten fail.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from conformance import run_conformance
from reference import zoo
from reference.sinusoidal import model_config
from reference.zoo.cases import cases as model_cases
from reference.zoo.plan import plan
from support import assert_config_error

ROOT = Path(__file__).resolve().parents[2]
CORRECT = [ROOT / "examples/sinusoidal/vaswani_torch.py", ROOT / "examples/sinusoidal/fairseq_style.py"]
T2T = {"d_model": 512, "layout": "concatenated", "exponent": "2i/(d-2)", "base": 10000.0, "dims": 1}


def _config() -> dict:
    return copy.deepcopy(zoo.load("transformer-base-t2t")["config"])


def test_transformer_base_reads_as_tensor2tensors_timing_signal():
    (setting,) = model_config.settings(_config())
    assert setting.params == T2T and setting.notes == ()
    assert list(plan(_config())) == ["sinusoidal.table"]


def test_the_timescales_default_and_their_ratio_is_the_base():
    config = _config()
    del config["min_timescale"], config["max_timescale"]
    (setting,) = model_config.settings(config)
    assert setting.params == T2T and len(setting.notes) == 2 and "get_timing_signal_1d's default" in setting.notes[0]
    config["max_timescale"] = 500.0
    assert model_config.settings(config)[0].params["base"] == 500.0


def test_other_families_records_have_no_sinusoidal_table():
    # tensor2tensor's Transformer and Transformer-XL (whose table R of distances is a sinusoidal table)
    assert [n for n in zoo.names() if model_config.settings(zoo.load(n)["config"]) is not None] == [
        "transfo-xl-wt103", "transformer-base-t2t"]


@pytest.mark.parametrize("edit, message", [
    (lambda c: c.update(min_timescale=2.0), "min_timescale: 2.0: sinusoidal.table's timescales start at 1"),
    (lambda c: c.update(max_timescale=1.0), "max_timescale: must exceed min_timescale 1"),
    (lambda c: c.update(pos="emb"), "pos: 'emb'"),
    (lambda c: c.update(hidden_size=2), "hidden_size: an integer of at least 4"),
])
def test_a_field_posref_cannot_read_is_one_error_naming_it(edit, message):
    config = _config()
    edit(config)
    assert_config_error(config, message)


def test_the_cases_and_their_positions():
    one = model_cases(_config(), "transformer-base-t2t", 1)["sinusoidal.table"]
    two = model_cases(_config(), "transformer-base-t2t", 2)["sinusoidal.table"]
    assert [c.id.rsplit("/", 1)[1] for c in one] == ["prefill-16", "drawn", "long"]
    assert one[0].arrays["positions"].tolist() == list(range(16)) and one[0].arrays["expected"].shape == (16, 512)
    assert one[1].arrays["positions"].tolist() != two[1].arrays["positions"].tolist()
    assert one[2].arrays["positions"].tolist()[-1] == 2**20


@pytest.mark.parametrize("path", CORRECT, ids=lambda p: p.stem)
def test_the_float32_ports_pass(path):
    report = run_conformance(f"{path}:table", "sinusoidal.table", model="transformer-base-t2t", seed=5,
                             identities=False)
    assert report.summary()["overall"] == "pass", [(c.id, c.verdict) for c in report.cases]
    assert not any(c.verdict == "skip" for c in report.cases)


@pytest.mark.parametrize("bug", ["variant_swapped", "frequency_exponent", "wrong_base"])
def test_a_configuration_bug_fails_every_case(bug):
    path = ROOT / f"examples/sinusoidal/buggy/{bug}.py"
    report = run_conformance(f"{path}:table", "sinusoidal.table", model="transformer-base-t2t", seed=5, identities=False)
    assert all(c.verdict == "fail" for c in report.cases) and len(report.cases) == 3
    assert {d.code for c in report.cases for d in c.diagnoses} == {bug.replace("_", "-")}
