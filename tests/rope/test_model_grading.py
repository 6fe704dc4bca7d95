"""Grading at a model's configuration (issue 27): ``--model NAME`` and ``--model-config FILE``.

The configuration bugs of real ports are re-enacted at the model whose configuration they break:
GPT-J graded with NEOX pairing (layout-swapped), Code Llama's base 1e6 dropped (wrong-base),
GPT-NeoX's partial rotary ignored (rotary-dim-mismatch), Llama 3.1's llama3 scaling dropped and
Gemma 3's global layers scaled like its local ones (scaling-mismatch), Phi-3's LongRoPE factor table
switched at exactly its original context (scaling-mismatch, at that case only); the correct twins
pass.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from conformance import run_conformance
from conformance.cli import main
from conformance.model import resolve
from conformance.reports import json_report
from reference import zoo
from reference.golden import catalog, store
from reference.zoo.cases import cases as model_cases

ROOT = Path(__file__).resolve().parents[2]
HF = str(ROOT / "examples/rope/hf_rotate_half.py") + ":apply"
GPTJ = str(ROOT / "examples/rope/gptj_rotate_every_two.py") + ":apply"
BUGGY = ROOT / "examples/rope/buggy"

# A port that reads head size, rotary size and base but drops spec.scaling (the llama3 type in
# llama.cpp, Unsloth and mlx-vlm; Gemma 3's global layers scaled like its local ones).
SCALING_DROPPED = '''
import torch
from conformance import Unsupported

def apply(x, positions, spec):
    if spec.layout != "half":
        raise Unsupported("half only")
    r, h = spec.rotary_dim, spec.rotary_dim // 2
    inv = 1.0 / (spec.base ** (torch.arange(0, r, 2, dtype=torch.float64) / r))
    ang = positions.to(torch.float64)[..., None] * inv
    cos = torch.cat([ang.cos()] * 2, -1)[:, :, None, :]
    sin = torch.cat([ang.sin()] * 2, -1)[:, :, None, :]
    xr = x[..., :r].to(torch.float64)
    out = xr * cos + torch.cat([-xr[..., h:], xr[..., :h]], -1) * sin
    return torch.cat([out.to(x.dtype), x[..., r:]], -1)
'''


# Phi-3's LongRoPE with the long factors taken at seq_len >= original_max_position_embeddings, one
# token early (Unsloth's and llama.cpp's Phi-3 ports; transformers switches when seq_len > original).
LONGROPE_EARLY = '''
import math
import torch
from conformance import Unsupported


def apply(x, positions, spec, early=True):
    sc = spec.scaling or {}
    if sc.get("rope_type") != "longrope" or spec.layout != "half":
        raise Unsupported("longrope, half only")
    original = sc["original_max_position_embeddings"]
    seq_len = spec.seq_len if spec.seq_len is not None else int(positions.max()) + 1
    long = seq_len >= original if early else seq_len > original
    ext = torch.tensor(sc["long_factor"] if long else sc["short_factor"], dtype=torch.float64)
    r = spec.rotary_dim
    inv = 1.0 / (ext * spec.base ** (torch.arange(0, r, 2, dtype=torch.float64) / r))
    factor = sc.get("factor") or (sc.get("max_position_embeddings", original) / original)
    att = sc.get("attention_factor") or (math.sqrt(1 + math.log(factor) / math.log(original)) if factor > 1 else 1.0)
    ang = positions.to(torch.float64)[..., None] * inv
    cos = (torch.cat([ang.cos()] * 2, -1) * att)[:, :, None, :]
    sin = (torch.cat([ang.sin()] * 2, -1) * att)[:, :, None, :]
    h = r // 2
    xr = x[..., :r].to(torch.float64)
    out = xr * cos + torch.cat([-xr[..., h:], xr[..., :h]], -1) * sin
    return torch.cat([out.to(x.dtype), x[..., r:]], -1)


def apply_fixed(x, positions, spec):
    return apply(x, positions, spec, early=False)
'''


def _grade(target, model, protocol="rope.apply", **options):
    return run_conformance(target, protocol, model=model, seed=5, dtypes=("float32",), identities=False,
                           **options)


def _codes(report) -> set:
    return {d.code for c in report.cases if c.verdict in ("fail", "error") for d in c.diagnoses}


@pytest.mark.parametrize("buggy, model, code", [
    ("layout_swapped", "gpt-j-6b", "layout-swapped"),
    ("wrong_base", "codellama-7b", "wrong-base"),
    ("rotary_dim_mismatch", "gpt-neox-20b", "rotary-dim-mismatch"),
])
def test_a_configuration_bug_fails_at_the_model_it_breaks(buggy, model, code):
    report = _grade(f"{BUGGY / buggy}.py:apply", model)
    assert report.summary()["overall"] == "fail"
    assert _codes(report) == {code}


@pytest.mark.parametrize("target, model", [(GPTJ, "gpt-j-6b"), (HF, "codellama-7b"), (HF, "llama-3.1-8b"),
                                           (HF, "gemma-3-12b"), (HF, "gpt-neox-20b")])
def test_the_correct_twin_passes_at_its_model(target, model):
    report = _grade(target, model)
    assert report.summary()["overall"] == "pass", [(c.id, c.verdict) for c in report.cases]
    assert not any(c.verdict == "skip" for c in report.cases)


GLM_HF_PORT = f"""
import dataclasses, importlib.util
_spec = importlib.util.spec_from_file_location("gptj_port", {str(ROOT / "examples/rope/gptj_rotate_every_two.py")!r})
_gptj = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_gptj)

def apply(x, positions, spec):
    # glm-4-9b-chat-hf's rope_theta, run at the original ChatGLM record
    return _gptj.apply(x, positions, dataclasses.replace(spec, base=10000.0))
"""


def test_glm_records_disagree_on_the_base(tmp_path):
    """The original ChatGLM record (base 10000 x rope_ratio 500) passes an interleaved partial port;
    the -hf record's base 10000 run there fails wrong-base."""
    assert _grade(GPTJ, "glm-4-9b-chat").summary()["overall"] == "pass"
    (tmp_path / "port.py").write_text(GLM_HF_PORT)
    report = _grade(f"{tmp_path / 'port.py'}:apply", "glm-4-9b-chat")
    assert report.summary()["overall"] == "fail" and _codes(report) == {"wrong-base"}


def test_a_dropped_scaling_fails_only_where_the_model_scales(tmp_path):
    (tmp_path / "port.py").write_text(SCALING_DROPPED)
    target = f"{tmp_path / 'port.py'}:apply"
    llama = _grade(target, "llama-3.1-8b")
    assert _codes(llama) == {"scaling-mismatch"}
    gemma = _grade(target, "gemma-3-12b")
    bad = {c.id.split("/")[1] for c in gemma.cases if c.verdict == "fail"}
    good = {c.id.split("/")[1] for c in gemma.cases if c.verdict in ("pass", "acceptable")}
    assert bad == {"gemma-3-12b-full-attention"} and good == {"gemma-3-12b-sliding-attention"}
    assert _codes(gemma) == {"scaling-mismatch"}
    # Dynamic NTK changes nothing up to the original context: only the case past it fails.
    internlm = _grade(target, "internlm3-8b")
    assert [c.id for c in internlm.cases if c.verdict == "fail"] == ["rope.apply/internlm3-8b/decode-32768-seq32769"]


def test_the_factor_table_switched_at_the_original_context_fails_there_only(tmp_path):
    (tmp_path / "port.py").write_text(LONGROPE_EARLY)
    for model in ("phi-3.5-mini", "phi-4-mini"):
        report = _grade(f"{tmp_path / 'port.py'}:apply", model)
        failed = [c for c in report.cases if c.verdict == "fail"]
        assert [c.id for c in failed] == [f"rope.apply/{model}/decode-4095-seq4096"]
        assert _codes(report) == {"scaling-mismatch"}
        assert "long factors used at seq_len 4096 (original 4096)" in failed[0].diagnoses[0].message
        twin = _grade(f"{tmp_path / 'port.py'}:apply_fixed", model)
        assert twin.summary()["overall"] == "pass", [(c.id, c.verdict) for c in twin.cases]


def test_the_cases_reach_what_breaks_real_ports():
    config = zoo.load("phi-3.5-mini")["config"]
    cases = model_cases(config, "phi-3.5-mini", 11)["rope.apply"]
    names = [c.id.rsplit("/", 1)[1] for c in cases]
    assert {"prefill-8", "decode-131071", "row-offsets", "left-padded"} <= set(names)
    # LongRoPE switches tables at the original context: one step below, at and above it.
    assert {"decode-4094-seq4095", "decode-4095-seq4096", "decode-4096-seq4097"} <= set(names)
    assert all(c.arrays["x"].shape[2] == 32 for c in cases)  # the model's 32 attention heads
    llama = model_cases(zoo.load("llama-3.1-8b")["config"], "llama-3.1-8b", 11)["rope.apply"]
    assert "decode-262143" in {c.id.rsplit("/", 1)[1] for c in llama}  # past the context: llama3 extrapolates


def test_ids_stay_and_values_change_with_the_seed():
    config = zoo.load("llama-3.1-8b")["config"]
    one = model_cases(config, "llama-3.1-8b", 1)["rope.apply"]
    two = model_cases(config, "llama-3.1-8b", 2)["rope.apply"]
    again = model_cases(config, "llama-3.1-8b", 1)["rope.apply"]
    assert [c.id for c in one] == [c.id for c in two]
    assert not np.array_equal(one[0].arrays["x"], two[0].arrays["x"])
    assert one[1].arrays["positions"].tolist() != two[1].arrays["positions"].tolist()  # "drawn"
    assert all(np.array_equal(a.arrays["expected"], b.arrays["expected"]) for a, b in zip(one, again))


@pytest.mark.slow  # 20 s; tests/rope/test_model_vectors.py recomputes a committed case in the default selection
def test_the_zoo_record_reproduces_the_certified_vectors_of_the_same_model():
    """The record's parameters, on the committed case's inputs, give its certified outputs."""
    (setting,) = __import__("reference.rope.model_config", fromlist=["settings"]).settings(
        zoo.load("llama-3.1-8b")["config"])
    stored = store.get_case("rope.apply/llama3.1-d128/decode-131071")
    inputs = {role: stored.arrays[role] for role in ("x", "positions")}
    params = {**stored.params, **setting.params}
    out = catalog.protocol("rope.apply").compute(params, inputs, "cpu")
    np.testing.assert_array_equal(np.asarray(out["expected"]), stored.arrays["expected"])


def _hf_config(tmp_path, name: str, form: str) -> Path:
    config = copy.deepcopy(zoo.load(name)["config"])
    if form == "rope_parameters":
        config["rope_parameters"] = {**(config.pop("rope_scaling") or {"rope_type": "default"}),
                                     "rope_theta": config.pop("rope_theta")}
    path = tmp_path / f"{form}.json"
    path.write_text(json.dumps(config))
    return path


def test_model_config_reads_both_forms_and_the_report_names_the_file(tmp_path):
    reports = []
    for form in ("rope_scaling", "rope_parameters"):
        report = run_conformance(HF, "rope.apply", model_config=_hf_config(tmp_path, "llama-3.1-8b", form), seed=5,
                                 dtypes=("float32",), identities=False)
        assert report.summary()["overall"] == "pass"
        assert report.model["config"] == str(tmp_path / f"{form}.json") and len(report.model["sha256"]) == 64
        json_report.validate(json.loads(json.dumps(report.to_json(), default=str)))
        reports.append(report)
    assert [c.id.split("/", 2)[2] for c in reports[0].cases] == [c.id.split("/", 2)[2] for c in reports[1].cases]


def test_the_report_names_the_model_and_the_repro_repeats_the_case(tmp_path):
    (tmp_path / "port.py").write_text(SCALING_DROPPED)
    target = f"{tmp_path / 'port.py'}:apply"
    report = _grade(target, "llama-3.1-8b")
    assert report.model == {"name": "llama-3.1-8b", "source": zoo.load("llama-3.1-8b")["source"]["url"]}
    assert report.to_json()["model"]["name"] == "llama-3.1-8b" and report.seed == 5
    json_report.validate(json.loads(json.dumps(report.to_json(), default=str)))  # the schema's model field
    bad = next(c for c in report.cases if c.verdict == "fail")
    assert "--model llama-3.1-8b" in bad.repro and "--seed 5" in bad.repro and f"--cases {bad.id}" in bad.repro


@pytest.mark.parametrize("args, message", [
    (["--model", "llama-3.1-8B"], "no model 'llama-3.1-8B' in the zoo (did you mean 'llama-3.1-8b'?)"),
    (["--model", "bloom-176b"], "--model bloom-176b: the model's configuration implies alibi.slopes, alibi.bias, not rope.apply"),
    (["--model", "gpt-j-6b", "--layout", "half"], "--layout half: gpt-j-6b pairs interleaved"),
    (["--model", "llama-3.1-8b", "--model-config", "x.json"], "give one of them"),
    (["--model-config", "/nonexistent/config.json"], "cannot read /nonexistent/config.json"),
])
def test_model_mistakes_are_one_line_exit_2(args, message, capsys):
    assert main(["conform", HF, "--protocol", "rope.apply", "--no-fresh", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_config_field_posref_cannot_read_is_named(tmp_path, capsys):
    config = copy.deepcopy(zoo.load("llama-3.1-8b")["config"])
    config["rope_scaling"]["rope_type"] = "su"
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert main(["conform", HF, "--protocol", "rope.apply", "--model-config", str(tmp_path / "config.json")]) == 2
    err = capsys.readouterr().err
    assert "rope_scaling: " in err and "'su'" in err and err.count("\n") == 1


def test_resolve_labels_a_config_file_by_its_name(tmp_path):
    path = tmp_path / "My Model.json"
    path.write_text("{}")
    assert resolve(config_path=str(path)).name == "My-Model"


def test_pytest_items_at_a_model():
    import conformance
    from conformance.loader import load_target

    params = conformance.cases("rope.apply", model="gpt-j-6b", dtypes="float32")
    ids = [p.id for p in params]
    # The 7 committed cases (the catalog's gpt-j-6b group with the zoo's tests it lacked) and the
    # 2 drawn ones whose ids no committed case has ("drawn", "left-padded").
    assert "rope.apply/gpt-j-6b/decode-2047:float32" in ids and len(ids) == 9
    assert {"rope.apply/gpt-j-6b/drawn:float32", "rope.apply/gpt-j-6b/batched-decode:float32"} <= set(ids)
    good, bad = load_target(GPTJ), load_target(f"{BUGGY / 'layout_swapped'}.py:apply")
    for param in params:
        (case,) = param.values
        assert case.check(good).verdict in ("pass", "acceptable")
        with pytest.raises(AssertionError, match="pairs follow the half layout, not the declared interleaved"):
            case.check(bad)


# transformers' rotary code of each model, built from the zoo's config as the library builds it
# (AutoConfig.for_model + the model's RotaryEmbedding and apply_rotary_pos_emb). Measured over
# seeds 1-3 in float32 and bfloat16: every case passes, worst error/budget 0.60-0.79.
# One of each scaling and pairing in the default selection; the rest are marked slow.
HF_MODELS = ["llama-3.1-8b", "phi-3.5-mini"] + [
    pytest.param(name, marks=pytest.mark.slow)
    for name in ("gpt-neox-20b", "glm-4-9b-chat-hf", "llama-3.2-1b", "qwen2-7b", "qwen3-8b", "mistral-7b-v0.1",
                 "gemma-2-9b", "phi-4-mini", "codellama-7b", "ministral-3-3b")]


@pytest.mark.parametrize("name", HF_MODELS)
def test_transformers_own_rotary_code_passes_at_its_model(name):
    pytest.importorskip("transformers")
    from examples.rope.lib_transformers_config import adapter_for

    report = run_conformance(adapter_for(name), "rope.apply", model=name, seed=len(name),
                             dtypes=("float32", "bfloat16"))
    assert report.summary()["overall"] == "pass", [(c.id, c.dtype, c.verdict, c.budget_ratio) for c in report.cases]
    assert report.identities == [] and any("not run at a model's configuration" in n for n in report.notes)


def test_deepseek_v3_through_transformers_passes_and_its_plain_applier_pairs_the_other_way():
    """transformers' DeepSeek-V3 attention applies apply_rotary_pos_emb_interleave (rope_interleave),
    whose output keeps the rotated features de-interleaved: with them put back in order it passes at
    the model, without it fails output-permuted; the module's plain apply_rotary_pos_emb pairs
    (i, i + r/2) while the model pairs (2i, 2i + 1): layout-swapped."""
    pytest.importorskip("transformers")
    from transformers import AutoConfig

    from examples.rope.lib_transformers_config import adapter_for

    report = run_conformance(adapter_for("deepseek-v3"), "rope.apply", model="deepseek-v3", seed=1,
                             dtypes=("float32",))
    assert report.summary()["overall"] == "pass", [(c.id, c.verdict) for c in report.cases]
    report = run_conformance(adapter_for("deepseek-v3", interleave=False), "rope.apply", model="deepseek-v3",
                             seed=1, dtypes=("float32",))
    assert _codes(report) == {"layout-swapped"}
    from transformers.models.deepseek_v3 import modeling_deepseek_v3 as module

    def stored_order(x, positions, spec):  # the interleaved applier's output as it comes
        rotary = module.DeepseekV3RotaryEmbedding(AutoConfig.for_model("deepseek_v3", **config))
        cos, sin = rotary(x, positions)
        q = x.transpose(1, 2)
        return module.apply_rotary_pos_emb_interleave(q, q, cos, sin)[0].transpose(1, 2)

    config = {k: v for k, v in zoo.load("deepseek-v3")["config"].items() if k not in ("model_type", "architectures")}
    report = run_conformance(stored_order, "rope.apply", model="deepseek-v3", seed=1, dtypes=("float32",))
    assert _codes(report) == {"output-permuted"}


def test_fused_qk_at_the_models_grouped_query_heads():
    """rope.apply_qk at the model's query and key-value heads: transformers' own
    apply_rotary_pos_emb passes at Llama 3.1's 32 over 8; a k left unrotated at one KV head fails."""
    pytest.importorskip("transformers")
    from examples.rope.lib_transformers_config import adapter_for

    good = run_conformance(adapter_for("llama-3.1-8b", "rope.apply_qk"), "rope.apply_qk", model="llama-3.1-8b",
                           seed=2, dtypes=("float32",))
    assert good.summary()["overall"] == "pass"
    shapes = {tuple(c.id.split("/")[1:2]) for c in good.cases}
    assert shapes == {("llama-3.1-8b",)} and len(good.cases) == 8
    (case,) = [c for c in model_cases(zoo.load("llama-3.1-8b")["config"], "llama-3.1-8b", 2)["rope.apply_qk"]
               if c.id.endswith("/prefill-8")]
    assert case.arrays["q"].shape[2] == 32 and case.arrays["k"].shape[2] == 8
    # A kernel that skips k when there is one KV head: right at Llama's 8, wrong at Falcon-7B's
    # multi-query attention (71 query heads over one KV head).
    bad = _grade(f"{BUGGY / 'k_unrotated'}.py:apply_qk", "falcon-7b", protocol="rope.apply_qk")
    assert _codes(bad) == {"k-unrotated"}


@pytest.mark.parametrize("model", ["llama-3.1-8b", "phi-3.5-mini"])  # phi: the budget scaled by its attention factor
def test_garbage_fails_every_case_at_a_model(model):
    import torch

    zeros = _grade(lambda x, positions, spec: torch.zeros_like(x), model)
    assert all(c.verdict == "fail" for c in zeros.cases) and zeros.cases
    unrotated = _grade(lambda x, positions, spec: x.clone(), model)
    assert all(c.verdict == "fail" for c in unrotated.cases)
