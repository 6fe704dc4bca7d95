"""Grading the vision 2-D RoPE at a model's configuration (issue 27): ``--model qwen2-vl-7b``
(its vision encoder) and ``--model rope-vit-axial-deit-base`` / ``rope-vit-mixed-deit-base``.

transformers' own vision rotary code, built from the zoo's config (examples/mrope/
lib_transformers_config.py), passes rope2d.apply at its model; fed (column, row) where it reads
(row, column), it fails as axes-swapped. The spec-reading port of examples/rope2d passes at every
model; its buggy twins fail with their own diagnosis.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance import run_conformance

ROOT = Path(__file__).resolve().parents[2]
ROPE_VIT = str(ROOT / "examples/rope2d/rope_vit.py") + ":apply"
BUGGY = ROOT / "examples/rope2d/buggy"


def _grade(target, model, dtypes=("float32",), seed=5):
    return run_conformance(target, "rope2d.apply", model=model, seed=seed, dtypes=dtypes, identities=False)


def _codes(report) -> set:
    return {d.code for c in report.cases if c.verdict in ("fail", "error") for d in c.diagnoses}


@pytest.mark.parametrize("name", ["qwen2-vl-7b", pytest.param("qwen2.5-vl-72b", marks=pytest.mark.slow),
                                  pytest.param("qwen3-vl-f1", marks=pytest.mark.slow)])
def test_transformers_vision_rotary_passes_at_its_model(name):
    pytest.importorskip("transformers")
    from examples.mrope.lib_transformers_config import vision_adapter_for

    report = _grade(vision_adapter_for(name), name, dtypes=("float32", "bfloat16"), seed=len(name))
    assert report.summary()["overall"] == "pass", [(c.id, c.dtype, c.verdict, c.budget_ratio) for c in report.cases]
    assert not any(c.verdict == "skip" for c in report.cases)


def test_transformers_vision_rotary_fed_the_other_axis_order_fails():
    pytest.importorskip("transformers")
    from examples.mrope.lib_transformers_config import vision_adapter_for

    good = vision_adapter_for("qwen2-vl-7b")

    def swapped(x, coords, spec):
        return good(x, coords.flip(-1), spec)  # BUG: (x, y) handed over as the encoder's (h, w)

    report = _grade(swapped, "qwen2-vl-7b")
    assert report.summary()["overall"] == "fail" and _codes(report) == {"axes-swapped"}


@pytest.mark.parametrize("model", ["qwen2-vl-7b", "rope-vit-axial-deit-base", "rope-vit-mixed-deit-base"])
def test_the_spec_reading_port_passes_at_each_model(model):
    report = _grade(ROPE_VIT, model)
    assert report.summary()["overall"] == "pass", [(c.id, c.verdict, c.budget_ratio) for c in report.cases]


@pytest.mark.parametrize("buggy, model, code", [
    ("axes_swapped", "rope-vit-axial-deit-base", "axes-swapped"),
    ("cls_rotated", "rope-vit-axial-deit-base", "cls-rotated"),
    ("one_ladder", "qwen2-vl-7b", "axis-ladder"),
])
def test_a_bug_fails_at_the_model(buggy, model, code):
    report = _grade(f"{BUGGY / buggy}.py:apply", model)
    assert report.summary()["overall"] == "fail" and _codes(report) == {code}


@pytest.mark.parametrize("model", ["qwen2-vl-7b", "rope-vit-mixed-deit-base"])
@pytest.mark.parametrize("garbage", ["zeros", pytest.param("unrotated", marks=pytest.mark.slow)])
def test_garbage_fails_every_case_at_the_model(model, garbage):
    import torch

    def apply(x, coords, spec):
        return torch.zeros_like(x) if garbage == "zeros" else x.clone()

    report = _grade(apply, model)
    assert report.cases and all(c.verdict == "fail" for c in report.cases), [(c.id, c.verdict) for c in report.cases]
