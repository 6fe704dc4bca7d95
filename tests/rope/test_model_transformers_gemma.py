"""Gemma 3's two RoPEs through transformers' own per-layer-type rotary (issue 27).

transformers 5 builds one ``Gemma3RotaryEmbedding`` for the model, holding a table per layer type
(``rope_parameters`` keyed by ``sliding_attention`` and ``full_attention``, read from the zoo's
``rope_local_base_freq`` and ``rope_scaling``), and each decoder layer asks it for its own type.
Model mode draws cases per layer kind (``rope.apply/gemma-3-12b-sliding-attention/...``): the
library's sliding table passes the sliding cases and its global table the global ones. The bug of
llama.cpp and mlx-vlm, the global layers' linear scaling applied to the local layers too, fails
the sliding cases as scaling-mismatch; the global table at the local layers fails too.

Also gpt-oss (sliding and full layers with one RoPE, YaRN): its record builds in transformers (the
config checks ``layer_types`` against ``num_hidden_layers``) and the library's rotary passes.
"""

from __future__ import annotations

import pytest

from conformance import run_conformance
from conformance.model import model_cases, resolve
from reference.zoo.cases import group_name

pytest.importorskip("transformers")

KINDS = ("sliding_attention", "full_attention")


def _grade(fn, kind, model="gemma-3-12b", dtypes=("float32",)):
    return run_conformance(fn, "rope.apply", model=model, seed=7, dtypes=dtypes, identities=False,
                           cases=f"rope.apply/{group_name(model, kind)}/*")


def _codes(report) -> set:
    return {d.code for c in report.cases if c.verdict in ("fail", "error") for d in c.diagnoses}


@pytest.mark.parametrize("kind", KINDS)
def test_each_layer_types_table_passes_at_its_layers(kind):
    from examples.rope.lib_transformers_config import adapter_for

    report = _grade(adapter_for("gemma-3-12b", layer_type=kind), kind)
    assert report.summary()["overall"] == "pass", [(c.id, c.verdict, c.budget_ratio) for c in report.cases]
    committed, drawn = model_cases(resolve("gemma-3-12b"), "rope.apply", 7)
    group = group_name("gemma-3-12b", kind)
    expected = sorted(c.id for c in committed + drawn if c.id.split("/")[1] == group)
    assert sorted(c.id for c in report.cases) == expected and len(expected) == 9


def test_the_global_scaling_on_the_local_layers_fails():
    """transformers' module built from a config that gives the sliding layers the global layers'
    linear scaling (at their own base), as llama.cpp and mlx-vlm did."""
    from transformers import AutoConfig
    from transformers.models.gemma3.modeling_gemma3 import (
        Gemma3RotaryEmbedding,
        apply_rotary_pos_emb,
    )

    from reference import zoo

    config = {k: v for k, v in zoo.load("gemma-3-12b")["config"].items() if k not in ("architectures", "model_type")}
    scaling = config.pop("rope_scaling")
    config["rope_parameters"] = {
        "full_attention": {**scaling, "rope_theta": config.pop("rope_theta")},
        "sliding_attention": {**scaling, "rope_theta": config.pop("rope_local_base_freq")},  # BUG: scaled too
    }
    rotary = Gemma3RotaryEmbedding(AutoConfig.for_model("gemma3_text", **config))

    def local_scaled(x, positions, spec):
        cos, sin = rotary(x, positions, "sliding_attention")
        q = x.transpose(1, 2)
        return apply_rotary_pos_emb(q, q, cos, sin)[0].transpose(1, 2)

    report = _grade(local_scaled, "sliding_attention")
    assert report.summary()["overall"] == "fail" and _codes(report) == {"scaling-mismatch"}
    assert {c.id.rsplit("/", 1)[1] for c in report.cases if c.verdict == "fail"} >= {"drawn", "left-padded"}


def test_the_global_table_at_the_local_layers_fails():
    from examples.rope.lib_transformers_config import adapter_for

    report = _grade(adapter_for("gemma-3-12b", layer_type="full_attention"), "sliding_attention")
    assert report.summary()["overall"] == "fail" and _codes(report)


def test_a_model_with_layer_types_needs_one_named():
    from examples.rope.lib_transformers_config import adapter_for

    with pytest.raises(ValueError, match=r"give layer_type, one of \['full_attention', 'sliding_attention'\]"):
        adapter_for("gemma-3-12b")
    with pytest.raises(ValueError, match="no layer_type to choose"):
        adapter_for("llama-3.1-8b", layer_type="full_attention")


def test_gpt_oss_builds_in_transformers_and_passes():
    from examples.rope.lib_transformers_config import adapter_for

    report = run_conformance(adapter_for("gpt-oss-20b"), "rope.apply", model="gpt-oss-20b", seed=3,
                             dtypes=("float32",), identities=False)
    assert report.summary()["overall"] == "pass", [(c.id, c.verdict, c.budget_ratio) for c in report.cases]
