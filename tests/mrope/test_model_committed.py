"""M-RoPE's and the vision 2-D RoPE's committed cases per zoo model (issue 27): the tests no seed
draws, at two heads, stored and certified like the catalog's, and graded first by ``--model``."""

from __future__ import annotations

import numpy as np
import pytest

from conformance import run_conformance
from conformance.model import model_cases, resolve
from reference import zoo
from reference.golden import catalog, store
from reference.mrope import model_config as mrope_config
from reference.zoo import vectors as zoo_vectors

VL = ("qwen2-vl-7b", "qwen2.5-vl-72b", "qwen3-vl-f1")


@pytest.mark.parametrize("protocol, tests", [
    ("mrope.apply", {"prefill-8", "powers-of-two", "image-at-end"}),
    ("rope2d.apply", {"largest-last-blocks", "video-2-frames"}),
])
def test_every_vl_model_has_its_committed_group(protocol, tests):
    stored = {c.id: c for c in store.iter_cases(protocol)}
    for name in VL:
        ids = {i.split("/", 2)[2] for i in stored if i.startswith(f"{protocol}/{name}/")}
        assert tests <= ids and not ids & {"text-drawn", "image-drawn", "batched-decode", "drawn"}, (name, ids)
        assert all(stored[f"{protocol}/{name}/{t}"].arrays["x"].shape[2] <= 2 for t in ids)


def test_the_last_position_is_the_records_context():
    for name in VL:
        (setting,) = mrope_config.settings(zoo.load(name)["config"])
        case = store.get_case(f"mrope.apply/{name}/decode-{setting.max_positions - 1}")
        assert case.arrays["positions"].tolist() == [[[setting.max_positions - 1]]] * 3
        assert {k: case.params[k] for k in setting.params} == setting.params


def test_rope_mixed_and_positions_commit_nothing():
    """RoPE-Mixed's frequencies and every mrope.positions prompt are drawn: no seedless case."""
    names = {g.name for g in zoo_vectors.groups("rope2d")}
    assert "rope-vit-axial-deit-base" in names and not any("mixed" in n for n in names)
    assert not [g for g in zoo_vectors.groups("mrope") if g.protocol == "mrope.positions"]


def test_the_stored_values_are_the_references():
    case = store.get_case("mrope.apply/qwen2-vl-7b/image-at-end")
    out = catalog.protocol("mrope.apply").compute(case.params, {r: case.arrays[r] for r in ("x", "positions")}, "cpu")
    np.testing.assert_array_equal(np.asarray(out["expected"]), case.arrays["expected"])


def test_model_mode_grades_them_first_and_a_correct_port_passes():
    committed, drawn = model_cases(resolve("qwen2-vl-7b"), "rope2d.apply", 3)
    assert {c.id for c in committed} >= {"rope2d.apply/qwen2-vl-7b/largest-last-blocks"}
    assert not {c.id for c in committed} & {c.id for c in drawn}
    pytest.importorskip("transformers")
    from examples.mrope.lib_transformers_config import vision_adapter_for

    report = run_conformance(vision_adapter_for("qwen2-vl-7b"), "rope2d.apply", model="qwen2-vl-7b", seed=3,
                             dtypes=("float32",), identities=False)
    assert report.summary()["overall"] == "pass", [(c.id, c.verdict) for c in report.cases if c.verdict != "pass"]
    assert "rope2d.apply/qwen2-vl-7b/video-2-frames" in {c.id for c in report.cases}
