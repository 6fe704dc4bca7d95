"""The Gaussian-kernel RoPE configuration of the zoo (gaussian-rope-seed-002, the seed document's
example) read and graded under --model (issue 27): the correct port passes both protocols, the
document's own code (K at the token index) and absolute kernels in the score fail as kernel-mismatch."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from conformance import run_conformance
from conformance.model import model_cases, resolve
from reference import zoo
from reference.gaussian_rope import model_config
from support import assert_config_error

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples/gaussian_rope"
MODEL = "gaussian-rope-seed-002"


def _config() -> dict:
    return copy.deepcopy(zoo.load(MODEL)["config"])


def test_the_record_reads_as_the_documents_example():
    (setting,) = model_config.settings(_config())
    assert setting.params == {"head_dim": 64, "rotary_dim": 64, "base": 10000.0, "layout": "interleaved",
                              "kernel": {"a1": 0.7, "a2": 0.3, "s1": 5.0, "s2": 20.0}}
    assert setting.seq_len == 128 and "layout" in setting.notes[0]
    others = [n for n in zoo.names() if n != MODEL and model_config.settings(zoo.load(n)["config"]) is not None]
    assert others == []


@pytest.mark.parametrize("edit, message", [
    (lambda c: c["kernel"].pop("s2"), "kernel: must be a dict with keys a1, a2, s1, s2"),
    (lambda c: c["kernel"].update(s1=0), "kernel: s1 must be > 0"),
    (lambda c: c.update(head_dim=63), "head_dim: 63 is odd"),
    (lambda c: c.update(rope_theta="1e4"), "rope_theta: a positive number"),
    (lambda c: c.update(seq_len=4), "seq_len: an integer of at least 9"),
])
def test_a_field_posref_cannot_read_is_one_error_naming_it(edit, message):
    config = _config()
    edit(config)
    assert_config_error(config, message)


def test_committed_cases_and_drawn_ones():
    committed, drawn = model_cases(resolve(MODEL), "gaussian_rope.apply", 3)
    assert [c.id.rsplit("/", 1)[1] for c in committed] == ["prefill-8", "decode-127", "decode-255"]
    assert [c.id.rsplit("/", 1)[1] for c in drawn] == ["drawn"]


@pytest.mark.parametrize("protocol, fn", [("gaussian_rope.apply", "apply"), ("gaussian_rope.score", "score")])
def test_the_correct_port_passes_at_the_configuration(protocol, fn):
    report = run_conformance(f"{EXAMPLES / 'gaussian_rope_torch.py'}:{fn}", protocol, model=MODEL, seed=3,
                             dtypes=("float32",))
    assert report.summary()["overall"] == "pass", [(c.id, c.verdict) for c in report.cases]
    assert report.model["name"] == MODEL


@pytest.mark.parametrize("name, protocol, fn", [("kernel_of_index", "gaussian_rope.apply", "apply"),
                                               ("absolute_kernels_in_score", "gaussian_rope.score", "score")])
def test_the_kernel_bugs_fail_at_the_configuration(name, protocol, fn):
    report = run_conformance(f"{EXAMPLES / 'buggy' / name}.py:{fn}", protocol, model=MODEL, seed=3,
                             dtypes=("float32",))
    codes = {d.code for c in report.cases if c.verdict == "fail" for d in c.diagnoses}
    assert report.summary()["overall"] == "fail" and "kernel-mismatch" in codes
