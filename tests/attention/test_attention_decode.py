"""attention.decode: an attention layer with its own KV cache driven through a script (issue 28)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from conformance import Unsupported, run_conformance  # noqa: E402
from conformance.attention import decode as decode_protocol  # noqa: E402
from conformance.attention.decode_spec import DecodeSpec, spec_of  # noqa: E402
from conformance.core import registry  # noqa: E402
from reference import attention  # noqa: E402
from reference.attention import decode_vectors  # noqa: E402
from reference.golden import store  # noqa: E402
from support import load_file  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "attention"
SDPA = f"{EXAMPLES / 'decode_sdpa.py'}:decode"
HF = f"{EXAMPLES / 'hf_decode_cache.py'}:decode"
HF_REPREFILL = f"{EXAMPLES / 'hf_decode_cache.py'}:decode_reprefill"
BUGGY = {p.stem: p for p in (EXAMPLES / "buggy").glob("*.py") if p.stem.startswith(("cache_", "decode_"))}
PROTOCOL = "attention.decode"


def _cases():
    return {c.id.rsplit("/", 1)[1]: c for c in store.iter_cases(PROTOCOL)}


def _run(target, dtypes=("float32",), cases=None, **options):
    return run_conformance(target, PROTOCOL, dtypes=dtypes, cases=cases, identities=False,
                           **{"fresh": False, **options})


def _by_case(report):
    return {(c.id.rsplit("/", 1)[1], c.dtype): c for c in report.cases}


def test_protocol_is_registered_with_its_codes():
    proto = registry.get(PROTOCOL)
    assert proto.drives_calls and proto.arity == 2
    codes = registry.families()["attention"].codes
    assert {"cache-stale-base", "cache-table-mismatch", "decode-position-off-by-one"} <= set(codes)


def test_scripts_cross_the_original_length_with_left_padding():
    cases = _cases()
    assert set(cases) == {"default-left-padding", "dynamic-ntk-recompute", "dynamic-ntk-fixed", "longrope-recompute",
                          "longrope-fixed"}
    for name, case in cases.items():
        p, pos, mask = case.params, case.arrays["positions"], case.arrays["attention_mask"]
        assert p["num_heads"] == 4 and p["num_kv_heads"] == 2 and 32 <= p["d_model"] <= 64
        assert p["steps"][0] > 1 and all(n >= 1 for n in p["steps"][1:]) and p["steps"].count(1) >= 3
        assert mask[0].all() and not mask[1].all() and (np.diff(mask[1]) >= 0).all()  # row 1 left-padded
        if p["scaling"] is not None:
            original = p["scaling"]["original_max_position_embeddings"]
            lengths = [int(pos[:, :stop].max()) + 1 for _, stop in decode_vectors.step_bounds(p["steps"])]
            assert min(lengths) <= original < max(lengths), name  # the script crosses the switch


def _history_reference(params, inputs, stop, seq_len, past=None):
    """Rows [past, stop) of reference.attention.forward over the tokens before stop: without a cache
    (past None), or with the first ``past`` tokens' keys and values as a KV cache (rotated with the
    same table), the way a correct cache holds them."""
    from reference.attention.vectors import config_of

    cfg = config_of(dict(params, seq_len=seq_len))
    weights = {n: inputs[n] for n in ("wq", "wk", "wv", "wo")}
    h, pos, mask = inputs["hidden"][:, :stop], inputs["positions"][:, :stop], inputs["attention_mask"][:, :stop]
    if past is None:
        return attention.forward(h, weights, pos, cfg, attention_mask=mask.astype(bool), backend="numpy")
    st = attention.stages(h[:, :past], weights, pos[:, :past], cfg, attention_mask=mask[:, :past].astype(bool))
    pk = st["kr"].transpose(0, 2, 1, 3)
    pv = st["v"].transpose(0, 2, 1, 3)
    # the cache's keys sit at positions 0..P-1 in reference.attention; with left padding the positions
    # differ, so compare on the unpadded row only (row 0: positions 0..past-1 exactly)
    return attention.forward(h[:1, past:], weights, pos[:1, past:], cfg, attention_mask=mask[:1].astype(bool),
                             past_keys=pk[:1], past_values=pv[:1], backend="numpy")


def test_each_step_is_the_forward_over_the_whole_history():
    """The stored step t = forward over tokens 0..stop_t - 1 without a cache, the step's rows; on the
    unpadded row that equals the forward of the step's tokens after a correct cache of the earlier
    keys rotated with the same table (the identity a serving cache must keep)."""
    for name, case in _cases().items():
        p, x = case.params, case.arrays
        for start, stop in decode_vectors.step_bounds(p["steps"]):
            seq_len = decode_vectors.step_seq_len(p, x["positions"], stop)
            full = _history_reference(p, x, stop, seq_len)[:, start:]
            graded = x["attention_mask"][:, start:stop].astype(bool)
            np.testing.assert_allclose(np.where(graded[..., None], x["expected"][:, start:stop], 0),
                                       np.where(graded[..., None], full, 0), rtol=0, atol=1e-12, err_msg=name)
            if start:
                cached = _history_reference(p, x, stop, seq_len, past=start)
                np.testing.assert_allclose(cached[0], full[0], rtol=0, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("kind", ["dynamic", "longrope"])
def test_the_semantics_changes_the_expected_values_only_where_the_tables_differ(kind):
    """One script's inputs under both semantics: dynamic NTK's recompute keeps the base frequencies
    up to the original length (equal to default RoPE there) and scales after it, while fixed scales
    from the first step; LongRoPE's recompute uses the short factors up to the original length and
    the long ones after, so it equals fixed (long throughout) exactly past the crossing and differs
    before it."""
    case = _cases()[f"{'dynamic-ntk' if kind == 'dynamic' else 'longrope'}-recompute"]
    p, x = case.params, case.arrays
    original = p["scaling"]["original_max_position_embeddings"]
    before = after = 0
    for start, stop in decode_vectors.step_bounds(p["steps"]):
        length = int(x["positions"][:, :stop].max()) + 1
        recompute = _history_reference(p, x, stop, length)[:, start:]
        fixed = _history_reference(dict(p, semantics="fixed"), x, stop, p["max_model_len"])[:, start:]
        plain = _history_reference(dict(p, scaling=None), x, stop, 0)[:, start:]
        rows = x["attention_mask"][:, start:stop].astype(bool)[..., None]
        differ = lambda a, b: np.abs(np.where(rows, a - b, 0)).max() > 1e-6  # noqa: E731
        assert differ(fixed, plain)  # fixed: scaled from the first step
        if length <= original:
            before += 1
            assert not differ(recompute, plain) if kind == "dynamic" else differ(recompute, fixed)
        else:
            after += 1
            assert differ(recompute, plain)
            if kind == "longrope":
                assert not differ(recompute, fixed)
    assert before and after


def test_decode_sdpa_passes_every_script_under_its_semantics():
    report = _run(SDPA)
    assert len(report.cases) == 5
    assert all(c.verdict == "pass" for c in report.cases), [(c.id, c.dtype, c.verdict, c.diagnoses)
                                                            for c in report.cases]


@pytest.mark.slow
def test_decode_sdpa_passes_in_every_dtype():
    report = _run(SDPA, dtypes=("float32", "bfloat16", "float16"))
    assert len(report.cases) == 15
    assert all(c.verdict == "pass" for c in report.cases), [(c.id, c.dtype, c.verdict, c.diagnoses)
                                                            for c in report.cases]


def test_decode_sdpa_passes_the_drawn_scripts():
    """Fresh scripts (reference/attention/decode_vectors.fresh: default RoPE, and a scaled RoPE under a
    drawn semantics crossing the original length) of two seeds."""
    for seed in (1, 2):
        report = _run(SDPA, cases="attention.decode/fresh/*", fresh=True, seed=seed)
        assert len(report.cases) == 2 and {c.id.split("/")[1] for c in report.cases} == {"fresh"}
        assert all(c.verdict == "pass" for c in report.cases), [(c.id, c.diagnoses) for c in report.cases]


def test_a_layer_that_ignores_the_semantics_fails_the_fixed_cases():
    """decode_sdpa told 'recompute' whatever the spec says: the fixed scripts fail, the others pass."""
    layer = load_file(ROOT / "examples" / "attention" / "decode_sdpa.py").DecodeLayer

    def always_recompute(weights, spec):
        import dataclasses

        return layer(weights, dataclasses.replace(spec, semantics="recompute"))

    got = _by_case(_run(always_recompute))
    assert {name for (name, _), c in got.items() if c.verdict == "fail"} == {"dynamic-ntk-fixed", "longrope-fixed"}


@pytest.mark.parametrize("stem, code, step", [("cache_stale_base", "cache-stale-base", 3),
                                              ("cache_table_mismatch", "cache-table-mismatch", 3),
                                              ("decode_position_off_by_one", "decode-position-off-by-one", 1)])
def test_each_buggy_layer_gets_its_code_at_the_first_step_it_shows(stem, code, step):
    module = load_file(BUGGY[stem])
    assert module.CODE == code and module.PROTOCOL == PROTOCOL
    report = _run(f"{BUGGY[stem]}:decode", **module.OPTIONS)
    (case,) = report.cases
    assert case.verdict == "fail"
    assert [d.code for d in case.diagnoses] == [code]
    assert case.diagnoses[0].message.startswith(f"step {step} ")
    assert case.worst_index[0] >= step and case.worst_location.startswith("step ")


def test_stale_keys_pass_until_the_crossing():
    """The stale-base layer matches the reference before the dynamic base changes: the fault needs
    the crossing, and nothing is diagnosed on the default script."""
    path = BUGGY["cache_stale_base"]
    got = _by_case(_run(f"{path}:decode", cases="*/default-left-padding,*/dynamic-ntk-recompute"))
    assert got[("default-left-padding", "float32")].verdict == "pass"
    assert got[("dynamic-ntk-recompute", "float32")].worst_index[0] >= 3


@pytest.mark.slow
def test_transformers_llama_attention_with_its_dynamic_cache():
    """Finding (transformers 5.x): LlamaAttention + DynamicCache passes default RoPE, fails dynamic NTK
    under recompute with cache-stale-base (HF #25104) and LongRoPE with cache-table-mismatch at the
    crossing; Phi-3's re-prefill at the switch makes LongRoPE pass, not dynamic NTK (its base moves at
    every step); fixed cases of a length-dependent scaling are skipped (Unsupported)."""
    pytest.importorskip("transformers")
    plain = _by_case(_run(HF))
    assert plain[("default-left-padding", "float32")].verdict == "pass"
    stale = plain[("dynamic-ntk-recompute", "float32")]
    assert stale.verdict == "fail" and [d.code for d in stale.diagnoses] == ["cache-stale-base"]
    mismatch = plain[("longrope-recompute", "float32")]
    assert mismatch.verdict == "fail" and [d.code for d in mismatch.diagnoses] == ["cache-table-mismatch"]
    for name in ("dynamic-ntk-fixed", "longrope-fixed"):
        assert plain[(name, "float32")].verdict == "skip"
        assert "no fixed-table mode" in plain[(name, "float32")].notes[0]
    again = _by_case(_run(HF_REPREFILL, cases="*/longrope-recompute,*/dynamic-ntk-recompute"))
    assert again[("longrope-recompute", "float32")].verdict == "pass"
    assert [d.code for d in again[("dynamic-ntk-recompute", "float32")].diagnoses] == ["cache-stale-base"]


class _Recorder(torch.nn.Module):
    """A layer that records its calls and answers with the float64 reference (through the sdpa layer)."""

    calls = []

    def __init__(self, weights, spec, raise_at=None):
        super().__init__()
        self.inner = load_file(ROOT / "examples" / "attention" / "decode_sdpa.py").decode(weights, spec)
        self.raise_at = raise_at
        self.n = 0

    def forward(self, hidden, positions, attention_mask):
        _Recorder.calls.append((tuple(hidden.shape), hidden.dtype, tuple(positions.shape), positions.dtype,
                                tuple(attention_mask.shape), attention_mask.dtype))
        if self.n == self.raise_at:
            raise RuntimeError("cache full")
        self.n += 1
        return self.inner(hidden, positions, attention_mask)


def test_each_step_gets_its_tokens_and_the_mask_of_everything_so_far():
    _Recorder.calls = []
    report = _run(lambda weights, spec: _Recorder(weights, spec), cases="*/default-left-padding")
    assert report.cases[0].verdict == "pass"
    case = _cases()["default-left-padding"]
    stops = [stop for _, stop in decode_vectors.step_bounds(case.params["steps"])]
    assert [c[4] for c in _Recorder.calls] == [(2, stop) for stop in stops]
    assert all(c[1] == torch.float32 and c[3] == torch.int64 and c[5] == torch.bool for c in _Recorder.calls)
    assert [c[0][1] for c in _Recorder.calls] == case.params["steps"]


def test_a_step_that_raises_ends_the_script_naming_the_step():
    report = _run(lambda weights, spec: _Recorder(weights, spec, raise_at=2), cases="*/default-left-padding")
    (case,) = report.cases
    assert case.verdict == "fail"
    raised = [d for d in case.diagnoses if d.code == "raised"]
    assert raised and raised[0].message.startswith("step 2 ") and "cache full" in raised[0].message


def test_a_step_that_hangs_times_out_under_the_run_timeout_naming_the_step():
    import time

    def hangs_at_step_1(weights, spec):
        layer = _Recorder(weights, spec)

        def call(hidden, positions, attention_mask):
            if layer.n == 1:
                time.sleep(8)
            return layer(hidden, positions, attention_mask)
        return call

    start = time.perf_counter()
    (case,) = _run(hangs_at_step_1, cases="*/default-left-padding", timeout=1.0).cases
    assert time.perf_counter() - start < 8
    (timeout,) = [d for d in case.diagnoses if d.code == "timeout"]
    assert timeout.message.startswith("step 1 ")


def test_a_factory_that_returns_no_layer_and_a_layer_of_zeros_fail():
    def not_a_layer(weights, spec):
        return 3

    (case,) = _run(not_a_layer, cases="*/default-left-padding").cases
    assert case.verdict == "fail" and case.diagnoses[0].code == "shape-changed"

    def zeros(weights, spec):
        return lambda hidden, positions, attention_mask: torch.zeros_like(hidden)

    report = _run(zeros)
    assert all(c.verdict == "fail" for c in report.cases)


def test_unsupported_semantics_is_a_skip_and_isolate_skips_with_the_reason():
    def recompute_only(weights, spec):
        if spec.semantics != "recompute":
            raise Unsupported("recompute only")
        return load_file(ROOT / "examples" / "attention" / "decode_sdpa.py").decode(weights, spec)

    got = _by_case(_run(recompute_only, cases="*/longrope-*"))
    assert {n for (n, _), c in got.items() if c.verdict == "skip"} == {"longrope-fixed"}
    assert {n for (n, _), c in got.items() if c.verdict == "pass"} == {"longrope-recompute"}
    isolated = _run(SDPA, cases="*/default-left-padding", isolate=True)
    assert isolated.cases[0].verdict == "skip" and "isolate" in " ".join(isolated.cases[0].notes)


def test_spec_carries_the_semantics():
    spec = spec_of(_cases()["longrope-fixed"].params)
    assert isinstance(spec, DecodeSpec) and spec.semantics == "fixed" and spec.max_model_len == 64
    assert spec.step_seq_len(20) == 64 and spec_of(_cases()["longrope-recompute"].params).step_seq_len(20) == 21
    assert spec.past_keys is None and spec.attention_mask is None and spec.seq_len == 0
    assert decode_protocol.PROTOCOL.spec(_cases()["default-left-padding"]).semantics == "recompute"


def _drawn_scripts(seeds):
    """The committed scripts' shapes with inputs seeded by new case ids (docs/tolerance.md's
    calibration of attention.decode): GoldenCase records for run_conformance(golden_cases=...);
    the grading recomputes the reference, so no expected values are stored."""
    from reference.golden.store import GoldenCase

    out = []
    for seed in seeds:
        for group in decode_vectors.groups():
            for tg in group.test_groups:
                for test in tg.tests:
                    cid = f"{PROTOCOL}/calib-{seed}/{test.name}"
                    extra, arrays = decode_vectors.build(cid, tg.params, test)
                    arrays["expected"] = np.zeros(arrays["hidden"].shape)
                    out.append(GoldenCase(cid, PROTOCOL, f"calib-{seed}", {**tg.params, **extra}, "", [], arrays))
    return out


@pytest.mark.slow
def test_calibration_on_drawn_scripts():
    """docs/tolerance.md, "Stateful decode": correct layers pass every drawn script in every dtype;
    zeros and each cache fault fail every one they can show in, with their code."""
    cases = _drawn_scripts(range(5))
    dtypes = ("float32", "bfloat16", "float16")

    def run(target, pattern=None):
        return run_conformance(target, PROTOCOL, dtypes=dtypes, golden_cases=cases, identities=False, fresh=False,
                               max_time=None, cases=pattern).cases

    correct = {SDPA: None}
    try:
        import transformers  # noqa: F401

        # the scripts transformers gets right (the others are the finding of the HF test above)
        correct[HF_REPREFILL] = "*/default-left-padding,*/longrope-recompute"
    except ImportError:
        pass
    for target, pattern in correct.items():
        graded = [c for c in run(target, pattern) if c.verdict != "skip"]
        assert graded and all(c.verdict == "pass" and c.budget_ratio < 0.25 for c in graded), target
    faults = {f"{BUGGY['cache_stale_base']}:decode": None,
              f"{BUGGY['decode_position_off_by_one']}:decode": "decode-position-off-by-one"}
    for target, code in faults.items():
        for c in run(target, None if code else "*/dynamic-ntk-recompute,*/longrope-recompute"):
            want = code or ("cache-stale-base" if "dynamic" in c.id else "cache-table-mismatch")
            assert c.verdict == "fail" and [d.code for d in c.diagnoses] == [want], (c.id, c.dtype, c.budget_ratio)
    assert all(c.verdict == "fail" for c in run(lambda weights, spec: lambda h, p, m: torch.zeros_like(h)))
