"""attention.forward at a T5 model's configuration (issue 27): the model's heads and head size, its
buckets per stack, its scores unscaled (logit_scale 1); a port that keeps SDPA's default scale
fails ``attention-scale-wrong``, the correct one passes, and the reader says what it assumed."""

from __future__ import annotations

import copy

import pytest

from conformance import run_conformance
from reference import zoo
from reference.attention import model_cases, model_config
from reference.golden import store
from reference.golden.fresh import Draw
from reference.numerics.bias.t5 import edges
from support import assert_config_error

SDPA = "examples/attention/sdpa_rope.py:forward"
SCALE_DEFAULT = "examples/attention/buggy/scale_default.py:forward"


def test_a_t5_record_reads_as_two_unscaled_stacks():
    encoder, decoder = model_config.settings(zoo.load("mt5-base")["config"])
    common = {"num_heads": 12, "num_kv_heads": 12, "head_dim": 64, "encoding": "t5", "num_buckets": 32,
              "max_distance": 128, "logit_scale": 1.0}
    assert {k: encoder.params[k] for k in common} == common and encoder.params["causal"] is False
    assert decoder.kind == "decoder" and decoder.params["causal"] is True
    assert any("d_model 8 in the cases, not the model's 768" in n for n in encoder.notes)
    assert model_config.settings(zoo.load("llama-3-8b")["config"]) is None


@pytest.mark.parametrize("edit, message", [
    (lambda c: c.update(d_kv=0), "d_kv: a positive integer"),
    (lambda c: c.update(relative_attention_num_buckets=1), "relative_attention_num_buckets"),
])
def test_a_field_the_layer_cannot_take_is_named(edit, message):
    config = copy.deepcopy(zoo.load("mt5-base")["config"])
    edit(config)
    assert_config_error(config, message)


def test_no_pairwise_distance_is_a_bucket_edge():
    for name in ("mt5-base", "flan-t5-large"):
        for setting in model_config.settings(zoo.load(name)["config"]):
            bad = set(edges(num_buckets=32, max_distance=128, bidirectional=not setting.params["causal"], limit=1024))
            for seed in range(20):
                for tg in model_cases.groups(setting, Draw(seed, "t")):
                    for test in tg.tests:
                        (row,) = test.positions
                        assert not {abs(a - b) for a in row for b in row} & bad, (test.name, row)


def test_every_t5_model_commits_its_layer():
    stored = {c.id for c in store.iter_cases("attention.forward")}
    for name in ("mt5-base", "flan-t5-large", "t5-efficient-tiny", "t5-v1.1-base"):
        for stack in ("encoder", "decoder"):
            assert {f"attention.forward/{name}-{stack}/{t}" for t in ("prefill-8", "far")} <= stored


def test_sdpa_with_the_spec_scale_passes_and_the_default_scale_fails():
    good = run_conformance(SDPA, "attention.forward", model="t5-efficient-tiny", seed=2, dtypes=("float32",))
    assert good.summary()["overall"] == "pass", [(c.id, c.verdict, c.budget_ratio) for c in good.cases]
    assert any("d_model 8" in n for n in good.notes)  # the reader's notes reach the report
    bad = run_conformance(SCALE_DEFAULT, "attention.forward", model="t5-efficient-tiny", seed=2, dtypes=("float32",))
    assert {d.code for c in bad.cases for d in c.diagnoses} == {"attention-scale-wrong"}
    assert all(c.verdict == "fail" for c in bad.cases)



@pytest.mark.parametrize("model", ["mt5-base", pytest.param("flan-t5-large", marks=pytest.mark.slow)])
def test_transformers_t5_attention_passes_at_its_model_over_seeds(model):
    """transformers' own T5Attention (its scale 1, its bucket rule and table), graded at the model
    in float32 and bfloat16 over three seeds: every case passes; zeros from the same run fail."""
    pytest.importorskip("transformers")
    from examples.attention.lib_transformers_t5 import forward

    for seed in (1, 2, 3):
        report = run_conformance(forward, "attention.forward", model=model, seed=seed,
                                 dtypes=("float32", "bfloat16"))
        assert report.summary()["overall"] == "pass", [(c.id, c.dtype, c.verdict, c.budget_ratio)
                                                       for c in report.cases if c.verdict != "pass"]
        assert not any(c.verdict == "skip" for c in report.cases)

    def zeros(hidden, weights, positions, spec):
        return hidden.new_zeros(hidden.shape)

    garbage = run_conformance(zeros, "attention.forward", model=model, seed=1, dtypes=("float32", "bfloat16"))
    assert all(c.verdict == "fail" for c in garbage.cases)
