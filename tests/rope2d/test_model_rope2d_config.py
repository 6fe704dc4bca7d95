"""A model's vision 2-D RoPE read from its config (issue 27): reference.rope2d.model_config and
its cases (reference.rope2d.model_cases).

The Qwen-VL vision encoders (the fields transformers reads, its defaults filling what Qwen2-VL's
config.json leaves out) and RoPE-ViT (its reference code's arguments) must read as the catalog's
groups for the same models and as transformers reads them; the cases put the patches in the
encoder's own order; a field posref cannot read is one error naming it.
"""

from __future__ import annotations

import copy
import math

import pytest

from reference import zoo
from reference.golden.fresh import Draw
from reference.rope2d import model_config
from reference.rope2d.model_cases import groups, merge_order, mixed_freqs
from reference.rope2d.vectors import groups as catalog_groups
from reference.zoo.plan import plan
from support import assert_config_error

QWEN = ("qwen2-vl-7b", "qwen2.5-vl-72b", "qwen3-vl-f1")


def _config(name):
    return copy.deepcopy(zoo.load(name)["config"])


def _one(config) -> model_config.Setting:
    (setting,) = model_config.settings(config)
    return setting


def _catalog(group):
    (spec,) = [g for g in catalog_groups() if g.name == group]
    return spec.test_groups[0].params


@pytest.mark.parametrize("name, group", [("qwen2-vl-7b", "qwen2-vl-vision"), ("qwen2.5-vl-72b", "qwen2-vl-vision"),
                                         ("rope-vit-axial-deit-base", "rope-vit-b16")])
def test_a_record_reads_as_the_catalogs_group_for_that_model(name, group):
    assert _one(_config(name)).params == _catalog(group)


def test_qwen3_vl_and_rope_mixed():
    qwen3 = _one(_config("qwen3-vl-f1"))  # hidden_size 1152 over 16 heads
    assert (qwen3.params["head_dim"], qwen3.heads, qwen3.patch, qwen3.merge) == (72, 16, 16, 2)
    mixed = _one(_config("rope-vit-mixed-deit-base"))
    assert mixed.mixed and mixed.theta == 10.0 and (mixed.params["head_dim"], mixed.heads, mixed.grid) == (64, 12, 14)


def test_what_the_config_leaves_out_is_transformers_default_and_said():
    qwen2 = _one(_config("qwen2-vl-7b"))  # its vision_config has neither width nor heads
    assert (qwen2.params["head_dim"], qwen2.heads, qwen2.patch) == (80, 16, 14)  # spatial_patch_size 14
    assert {n.split(":")[0] for n in qwen2.notes} == {
        "vision_config.embed_dim 1280", "vision_config.num_heads 16", "vision base 10000",
        "vision_config.spatial_merge_size 2"}


@pytest.mark.parametrize("name", QWEN)
def test_the_reading_is_transformers_reading(name):
    pytest.importorskip("transformers")
    from transformers import AutoConfig

    config = _config(name)
    hf = AutoConfig.for_model(config.pop("model_type"), **{k: v for k, v in config.items() if k != "architectures"})
    vision, setting = hf.vision_config, _one(_config(name))
    width = vision.embed_dim if name == "qwen2-vl-7b" else vision.hidden_size
    assert setting.params["head_dim"] == width // vision.num_heads and setting.heads == vision.num_heads
    assert setting.params["base"] == vision.rope_parameters["rope_theta"]
    assert (setting.merge, setting.patch) == (vision.spatial_merge_size, vision.patch_size)


def test_the_cases_are_in_the_encoders_order():
    """The Qwen cases' patches are transformers' get_vision_position_ids for the same grids."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers.vision_utils import get_vision_position_ids

    setting = _one(_config("qwen2-vl-7b"))
    tests = {t.name: t for t in groups(setting, Draw(3, "x"))[0].tests}
    assert set(tests) == {"image-drawn", "image-448-last-blocks", "largest-last-blocks", "video-2-frames"}
    for name, (t, h, w), last in [("image-448-last-blocks", (1, 32, 32), 8), ("largest-last-blocks", (1, 256, 256), 8),
                                  ("video-2-frames", (2, 2, 2), 8)]:
        ids = get_vision_position_ids(torch.tensor([[t, h, w]]), 2)[-last:]  # (row h, column w)
        assert [tuple(c) for c in tests[name].coords[0]] == [(int(c), int(r)) for r, c in ids.tolist()], name
    rows = {y for _, y in tests["image-drawn"].coords[0]}
    cols = {x for x, _ in tests["image-drawn"].coords[0]}
    assert len(rows) != len(cols)  # never square


def test_the_vit_cases_and_the_mixed_frequencies():
    axial = _one(_config("rope-vit-axial-deit-base"))
    tests = {t.name: t for t in groups(axial, Draw(3, "x"))[0].tests}
    assert all(t.coords[0][0] == (-1, -1) and t.cls_tokens == 1 for t in tests.values())
    assert tests["grid-14x14-last-row"].coords[0][1:] == tuple((x, 13) for x in range(14))
    assert max(x for x, _ in tests["resolution-drawn"].coords[0]) >= 17  # past the 14-patch training grid
    mixed = _one(_config("rope-vit-mixed-deit-base"))
    (tg,) = groups(mixed, Draw(3, "x"))
    fx, fy = tg.params["freqs"]
    assert (len(fx), len(fx[0])) == (12, 32) and tg.params["freqs"] != groups(mixed, Draw(4, "x"))[0].params["freqs"]
    for h in range(12):  # |(f_x, f_y)| is the initialisation's magnitude 10^(-4k/64) in both halves
        for i in range(32):
            assert math.isclose(math.hypot(fx[h][i], fy[h][i]), 10.0 ** (-4 * (i % 16) / 64), rel_tol=1e-12)
    assert mixed_freqs(8, 1, 100.0, Draw(0, "y"))[0][0][0] != mixed_freqs(8, 1, 100.0, Draw(1, "y"))[0][0][0]
    assert merge_order(2, 4, 2) == [(0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (3, 0), (2, 1), (3, 1)]


def _set(path, value):
    def edit(config):
        node = config
        for p in path[:-1]:
            node = node[p]
        if value is KeyError:
            node.pop(path[-1])
        else:
            node[path[-1]] = value
    return edit


@pytest.mark.parametrize("name, edit, message", [
    ("qwen2.5-vl-72b", _set(("vision_config", "num_heads"), 7), "vision_config.hidden_size: 1280 is not a multiple"),
    ("qwen2.5-vl-72b", _set(("vision_config", "head_dim"), 66), "vision_config.head_dim: 66: axial 2-D RoPE needs"),
    ("qwen2.5-vl-72b", _set(("vision_config", "rope_parameters"), {"rope_type": "mrope", "rope_theta": 1e4}),
     "vision_config.rope_parameters.rope_type: 'mrope', not axial"),
    ("qwen2.5-vl-72b", _set(("vision_config", "rope_theta"), -1), "vision_config.rope_theta: a positive number"),
    ("qwen2-vl-7b", _set(("vision_config",), KeyError), "vision_config: model_type qwen2_vl needs"),
    ("rope-vit-axial-deit-base", _set(("rope_theta",), KeyError), "needs rope_theta"),
    ("rope-vit-axial-deit-base", _set(("rope_mixed",), "yes"), "rope_mixed: true or false"),
    ("rope-vit-axial-deit-base", _set(("img_size",), 225), "img_size: 225 is not a multiple of patch_size 16"),
])
def test_a_field_posref_cannot_read_is_one_error_naming_it(name, edit, message):
    config = _config(name)
    edit(config)
    assert_config_error(config, message)


def test_a_rope_vit_record_implies_rope2d_only():
    for name in ("rope-vit-axial-deit-base", "rope-vit-mixed-deit-base"):
        assert list(plan(_config(name))) == ["rope2d.apply"]
