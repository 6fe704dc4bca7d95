"""attention.forward in float16 and bfloat16 (conformance/attention/half.py, docs/tolerance.md
section 17): the budget admits correct layers (ours, an interleaved kernel, transformers' Llama,
Qwen2 and Mistral attention, eager and SDPA) and fails garbage (zeros, no causal mask, no
1/sqrt(d), a random output of the output's size) and the buggy examples on every case where
the fault shows (where float32 fails); the derivation's sensitivities hold against simulated
roundings; the GQA permutation bug is named."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from conformance import run_conformance
from conformance.attention import half
from conformance.attention.forward import PROTOCOL
from conformance.core import tolerance
from conformance.loader import load_target
from reference.golden import store

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "attention"
HALF = ("bfloat16", "float16")


def _sdpa():
    return load_target(f"{EXAMPLES / 'sdpa_rope.py'}:forward")


# -- garbage adapters (fixtures) ---------------------------------------------------------------

def zeros(hidden, weights, positions, spec):
    import torch

    return torch.zeros_like(hidden)


def no_causal_mask(hidden, weights, positions, spec):
    return _sdpa()(hidden, weights, positions, replace(spec, causal=False))


def random_output(hidden, weights, positions, spec):
    """Noise of the right magnitude: the correct output's standard deviation, random signs."""
    import torch

    out = _sdpa()(hidden, weights, positions, spec).float()
    g = torch.Generator().manual_seed(1)
    return (torch.randn(out.shape, generator=g) * out.std()).to(hidden.dtype)


GARBAGE = {"zeros": zeros, "no-causal-mask": no_causal_mask, "random-output": random_output,
           "scale-missing": f"{EXAMPLES / 'buggy' / 'scale_missing.py'}:forward",
           "encoding-offset": f"{EXAMPLES / 'buggy' / 'encoding_offset.py'}:forward",
           "factor-twice": f"{EXAMPLES / 'buggy' / 'factor_twice.py'}:forward",
           "heads-permuted": f"{EXAMPLES / 'buggy' / 'heads_permuted.py'}:forward"}


def _verdicts(target, dtypes, **kw):
    report = run_conformance(target, "attention.forward", dtypes=dtypes, fresh=False, timeout=120.0,
                             identities=False, **kw)
    return {(c.id, c.dtype): c for c in report.cases}


@pytest.mark.parametrize("name", sorted(GARBAGE))
def test_half_precision_fails_garbage_wherever_float32_does(name):
    """Every catalog case that float32 fails (the fault shows there: every case for zeros, noise
    and a missing scale; the causal ones for a missing mask; ...) fails in bfloat16 and float16."""
    got = _verdicts(GARBAGE[name], ("float32", *HALF))
    shows = sorted(i for (i, dt), c in got.items() if dt == "float32" and c.verdict == "fail")
    assert shows, f"{name}: no case shows the fault"
    if name in ("zeros", "random-output", "scale-missing"):
        graded = {i for (i, dt), c in got.items() if dt == "float32" and c.verdict != "skip"}
        if name == "scale-missing":  # right where the layer is unscaled (T5's logit_scale 1)
            unscaled = {i for i in graded if store.get_case(i).params.get("logit_scale") == 1.0}
            assert unscaled and not unscaled & set(shows)
            graded -= unscaled
        assert set(shows) == graded, sorted(graded - set(shows))
    missed = [(i, dt, got[i, dt].budget_ratio) for i in shows for dt in HALF if got[i, dt].verdict != "fail"]
    assert not missed, missed
    if name == "scale-missing":  # T5's missing 1/sqrt(d) fails clearly, not by a hair
        t5 = [got[i, "bfloat16"].budget_ratio for i in shows if "/t5/" in i]
        assert t5 and min(t5) >= 4, t5


@pytest.mark.parametrize("target", [
    f"{EXAMPLES / 'sdpa_rope.py'}:forward",
    f"{EXAMPLES / 'interleaved_rope.py'}:forward",
    f"{EXAMPLES / 'hf_llama_attention.py'}:forward",
    *(f"{EXAMPLES / 'hf_attention_variants.py'}:{f}_{impl}" for f in ("llama", "qwen2", "mistral")
      for impl in ("eager", "sdpa")),
])
def test_correct_layers_pass_in_every_dtype(target):
    if "hf_" in target:
        pytest.importorskip("transformers")
    got = _verdicts(target, ("float32", *HALF))
    graded = [c for c in got.values() if c.verdict != "skip"]
    assert graded and all(c.verdict == "pass" for c in graded), \
        [(c.id, c.dtype, c.verdict, c.budget_ratio) for c in graded if c.verdict != "pass"]


@pytest.mark.slow
def test_seed_sweep_correct_layers_pass_garbage_fails():
    """40 seeds of fresh cases (every kind: RoPE, YaRN, GQA shapes, interleaved, the biases),
    in float32, bfloat16 and float16: no correct layer fails, zeros always fail."""
    pytest.importorskip("transformers")
    from reference.golden.fresh import fresh_cases

    cases = [c for seed in range(40) for c in fresh_cases("attention.forward", seed)]
    for target in (f"{EXAMPLES / 'sdpa_rope.py'}:forward", f"{EXAMPLES / 'interleaved_rope.py'}:forward",
                   f"{EXAMPLES / 'hf_attention_variants.py'}:llama_eager",
                   f"{EXAMPLES / 'hf_attention_variants.py'}:qwen2_sdpa"):
        report = run_conformance(target, "attention.forward", dtypes=("float32", *HALF), golden_cases=cases,
                                 timeout=120.0, identities=False)
        bad = [(c.id, c.dtype, c.budget_ratio) for c in report.cases if c.verdict not in ("pass", "skip")]
        assert not bad, (target, bad)
    report = run_conformance(zeros, "attention.forward", dtypes=HALF, golden_cases=cases, timeout=120.0,
                             identities=False)
    assert all(c.verdict == "fail" for c in report.cases), [c.id for c in report.cases if c.verdict != "fail"]


# -- the derivation against simulated roundings ------------------------------------------------

def _simulate(st, spec, positions, u, rng):
    """The layer in float64 with every stored intermediate of an SDPA/eager layer in T perturbed
    by an independent relative error uniform in [-u, u] (q, k, v; RoPE's tables, products and sum;
    sqrt(scale) on q and k; the logits twice and after the bias; P; o; out)."""
    from reference import rope

    def rnd(x):
        return x * (1 + rng.uniform(-u, u, np.shape(x)))

    X, W = st["X"], st["W"]
    b, s, D = X.shape
    hq, hkv, d = spec.num_heads, spec.num_kv_heads, spec.head_dim
    P = st["keys"].shape[1] - s
    q, k, v = rnd(st["q"]), rnd(st["k"]), rnd(st["v"])
    if spec.encoding == "rope":
        r = spec.rotary_dim or d
        theta, f = rope.frequencies(r, spec.base, spec.scaling, spec.seq_len or None)
        i, j = rope.pair_indices(r, spec.layout)
        phi = positions[..., None].astype(np.float64) * theta
        C, S = rnd(f * np.cos(phi))[:, :, None], rnd(f * np.sin(phi))[:, :, None]  # shared by q and k

        def turn(x):
            out = x.copy()
            out[..., i] = rnd(rnd(x[..., i] * C) - rnd(x[..., j] * S))
            out[..., j] = rnd(rnd(x[..., j] * C) + rnd(x[..., i] * S))
            return out

        q, k = turn(q), turn(k)
    keys = np.concatenate([st["keys"][:, :P], k], axis=1)
    values = np.concatenate([st["values"][:, :P], v], axis=1)
    root = math.sqrt(1 / math.sqrt(d))
    q, keys = rnd(q * root), rnd(keys * root)
    heads = np.arange(hq) // (hq // hkv)
    z = rnd(rnd(np.einsum("bihe,bjhe->bhij", q, keys[:, :, heads])) + st["bias"])
    vis = st["vis"][:, None]
    z = np.where(vis, z, -np.inf)
    top = np.max(z, axis=-1, keepdims=True)
    e = np.exp(z - np.where(np.isfinite(top), top, 0))
    tot = e.sum(axis=-1, keepdims=True)
    p = rnd(np.where(tot > 0, e / np.where(tot > 0, tot, 1), 0))
    o = rnd(np.einsum("bhij,bjhe->bihe", p, values[:, :, heads]).reshape(b, s, hq * d))
    return rnd(o @ W["wo"].T)


@pytest.mark.parametrize("case_id", ["attention.forward/rope-llama-causal/positions-4090",
                                     "attention.forward/rope-gqa-groups/8-over-2-decode-2-after-4",
                                     "attention.forward/rope-yarn-causal/positions-60",
                                     "attention.forward/alibi-causal/prefill-8",
                                     "attention.forward/nope-bidirectional-padding/right-padding"])
@pytest.mark.parametrize("dtype", HALF)
def test_simulated_roundings_stay_within_the_budget_and_use_it(case_id, dtype):
    """50 draws of every rounding at its largest size u|x| (uniform, independent): the output's
    error stays within the budget (the sensitivities are right), and reaches a few per cent of it
    (the budget is not wide by orders of magnitude: zeros fail it by 10 to 30)."""
    case = store.get_case(case_id)
    spec = PROTOCOL.spec(case)
    prepared = PROTOCOL.prepare(case, spec, "float32", "cpu")
    st = PROTOCOL._stages(prepared, spec)
    positions = prepared.inputs_f64["positions"]
    budget = half.half_budget(st, spec, positions, dtype, "standard")
    rows = st["rows"][:, :, None]
    rng = np.random.default_rng(7)
    u = tolerance.unit_roundoff(dtype)
    worst = max(np.max(np.where(rows, np.abs(_simulate(st, spec, positions, u, rng) - st["out"]) / budget, 0))
                for _ in range(50))
    assert 0.02 < worst < 0.5, worst
    assert np.max(np.where(rows, np.abs(st["out"]) / budget, 0)) > 5  # zeros fail


def test_the_half_budget_applies_to_half_dtypes_only():
    assert half.is_half("bfloat16") and half.is_half("float16")
    assert not half.is_half("float32") and not half.is_half("float64")


# -- the GQA permutation bug --------------------------------------------------------------------

def _interleaved():
    return load_target(f"{EXAMPLES / 'interleaved_rope.py'}:forward")


def hf_gguf_loader(hidden, weights, positions, spec):
    """HF's GGUF loader before transformers PR 31788: the GGUF file holds k rows permuted per kv
    head into interleaved order (correct), and the loader undoes it with the query head count."""
    if spec.encoding != "rope" or spec.layout != "half" or spec.rotary_dim != spec.head_dim:
        from conformance import Unsupported

        raise Unsupported("rotate_half checkpoints only")
    permute = load_target(f"{EXAMPLES / 'interleaved_rope.py'}:permute")

    def reverse_permute(w, n):  # the loader's inverse of the converter's permute, per head of n
        return w.reshape(n, w.shape[0] // n // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)

    gguf = permute(weights["wk"], spec.num_kv_heads)
    return _sdpa()(hidden, dict(weights, wk=reverse_permute(gguf, spec.num_heads)), positions, spec)


def grouped_by_modulo(hidden, weights, positions, spec):
    """kv heads repeated (torch.repeat: query head h reads kv head h % hkv), not interleaved."""
    import torch
    import torch.nn.functional as F

    sdpa = {n: load_target(f"{EXAMPLES / 'sdpa_rope.py'}:{n}") for n in
            ("project", "encode", "with_cache", "allowed_keys", "additive_mask")}
    b, s, _ = hidden.shape
    q, k, v = sdpa["project"](hidden, weights, spec)
    q, k = sdpa["encode"](q, k, positions, spec)
    k, v, past = sdpa["with_cache"](k, v, spec)
    kpos = torch.cat((torch.arange(past).expand(b, past), positions), dim=1)
    mask = sdpa["additive_mask"](sdpa["allowed_keys"](b, s, past, spec, hidden.device), positions, kpos, spec,
                                 q.dtype, weights)
    g = spec.num_heads // spec.num_kv_heads
    out = F.scaled_dot_product_attention(q, k.repeat(1, g, 1, 1), v.repeat(1, g, 1, 1), attn_mask=mask)
    return F.linear(out.transpose(1, 2).reshape(b, s, -1), weights["wo"])


@pytest.mark.parametrize("adapter", [hf_gguf_loader, grouped_by_modulo,
                                     f"{EXAMPLES / 'buggy' / 'heads_permuted.py'}:forward"])
def test_the_gqa_permutation_bugs_are_named_on_the_gqa_cases(adapter):
    got = _verdicts(adapter, ("float32", "bfloat16"), cases="*rope-gqa-groups*")
    failing = [c for c in got.values() if c.verdict == "fail"]
    gqa = [i for (i, dt) in got if dt == "float32" and "-over-" in i and "interleaved" not in i]
    assert len(gqa) == 4 and set(gqa) <= {c.id for c in failing if c.dtype == "float32"}, gqa
    assert all("attention-heads-permuted" in [d.code for d in c.diagnoses] for c in failing), \
        [(c.id, c.dtype, [d.code for d in c.diagnoses]) for c in failing]
