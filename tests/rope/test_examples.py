"""The bundled examples: correct ones pass, each buggy one gets its diagnosis code.

Buggy examples are graded here by the two H6 modules directly: ``conformance.rope.diagnosis`` for
the numeric bugs (on golden-like cases built from reference.rope) and ``conformance.rope.blackbox``
for the behavioural ones. The runner's output validation (input-mutated, dtype-changed,
shape-changed, non-finite, raised, crashed, timeout on the golden cases) is tested end to end
in the runner's tests; here the same codes come from the black-box checks.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import reference.rope as rr  # noqa: E402
from conformance import Unsupported  # noqa: E402
from conformance.isolation import make_invoker  # noqa: E402
from conformance.rope.spec import RopeSpec  # noqa: E402
from support import diagnose, run_blackbox  # noqa: E402
from reference.golden.store import GoldenCase  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "rope"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def load(relpath):
    path = EXAMPLES / relpath
    spec = importlib.util.spec_from_file_location("posref_example_" + path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_case(spec, positions, *, heads=2, seed=0, name="case"):
    """A GoldenCase-like rope.apply record built from the float64 reference."""
    pos = np.asarray(positions, dtype=np.int64)
    x = np.random.default_rng(seed).standard_normal(pos.shape + (heads, spec.head_dim))
    expected = rr.apply(x, pos, rotary_dim=spec.rotary_dim, base=spec.base, layout=spec.layout)
    params = {"head_dim": spec.head_dim, "rotary_dim": spec.rotary_dim, "base": spec.base,
              "layout": spec.layout, "scaling": None, "seq_len": int(pos.shape[1])}
    return GoldenCase(id=f"rope.apply/test/{name}", protocol="rope.apply", group="test", params=params,
                      comment="", flags=[], arrays={"x": x, "positions": pos, "expected": expected})


def run_case(fn, case, spec, dtype):
    """(inputs_f64, output_f64) as the runner prepares and reads them."""
    x_t = torch.from_numpy(case.arrays["x"]).to(DTYPES[dtype])
    pos_t = torch.from_numpy(case.arrays["positions"].copy())
    inputs = {"x": x_t.to(torch.float64).numpy(), "positions": case.arrays["positions"]}
    out = fn(x_t, pos_t, spec)
    return inputs, out.detach().to(torch.float64).numpy()


POSITION_SETS = {
    "prefill": np.arange(12)[None].repeat(2, 0),
    "left-padded": np.stack([np.arange(12), np.arange(40, 52)]),
    "decode-4095": np.array([[4095]]),
    "mid": np.stack([np.arange(2040, 2052), np.arange(30000, 30012)]),
}


def specs_for(layout):
    return [RopeSpec(128, 128, 5e5, layout), RopeSpec(128, 32, 1e4, layout), RopeSpec(64, 64, 1e6, layout)]


CORRECT = [("hf_rotate_half.py", "half"), ("meta_complex.py", "interleaved"),
           ("gptj_rotate_every_two.py", "interleaved")]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("path,layout", CORRECT)
def test_correct_examples_get_no_diagnosis(path, layout, dtype):
    fn = load(path).apply
    for spec in specs_for(layout):
        for name, pos in POSITION_SETS.items():
            case = make_case(spec, pos, name=name)
            inputs, out = run_case(fn, case, spec, dtype)
            err = np.max(np.abs(out - rr.apply(inputs["x"], pos, rotary_dim=spec.rotary_dim,
                                               base=spec.base, layout=layout)))
            assert err < 0.1, (path, spec, name, err)
            assert diagnose(case, spec, inputs, out, dtype) == [], (path, spec, name, dtype)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("path,layout", CORRECT)
def test_correct_examples_pass_every_blackbox_check(path, layout, dtype):
    invoker = make_invoker(load(path).apply, None, isolate=False, timeout=None)
    results = run_blackbox(invoker, "rope.apply", dtype=DTYPES[dtype], device="cpu", layout=layout)
    assert len(results) == 12  # 10 + batch-independence and non-contiguous at a decode shape
    bad = [(r.id, r.verdict, r.residual, r.bound) for r in results if r.verdict != "pass"]
    assert bad == []
    # The checks are not vacuous: numeric residuals are measured and below their bounds.
    numeric = [r for r in results if r.bound not in (None, 0.0)]
    assert len(numeric) >= 6 and all(0.0 <= r.residual <= r.bound for r in numeric)


@pytest.mark.parametrize("path,layout", CORRECT)
def test_correct_examples_raise_unsupported_for_the_other_layout(path, layout):
    other = "interleaved" if layout == "half" else "half"
    x = torch.zeros(1, 2, 1, 8)
    with pytest.raises(Unsupported):
        load(path).apply(x, torch.zeros(1, 2, dtype=torch.int64), RopeSpec(8, 8, 1e4, other))


def test_hf_cache_and_frequencies_match_the_reference():
    hf = load("hf_rotate_half.py")
    spec = RopeSpec(128, 32, 5e5, "half")
    inv, factor = hf.frequencies(spec, 0)
    np.testing.assert_allclose(inv.double().numpy(), rr.inv_freq(32, 5e5), rtol=2e-7)
    assert factor == 1.0
    pos = np.array([[0, 1, 7, 4095]])
    cos, sin = hf.cache(torch.from_numpy(pos), spec)
    c_ref, s_ref = rr.cos_sin(pos, 32, 5e5)
    assert cos.shape == (1, 4, 16)
    np.testing.assert_allclose(cos.double().numpy(), c_ref, atol=1e-5 * 4096)
    np.testing.assert_allclose(sin.double().numpy(), s_ref, atol=1e-5 * 4096)
    lin, _ = hf.frequencies(RopeSpec(128, 32, 5e5, "half", scaling={"rope_type": "linear", "factor": 4.0}), 0)
    np.testing.assert_allclose(lin.double().numpy(), rr.inv_freq(32, 5e5) / 4, rtol=2e-7)
    with pytest.raises(Unsupported):
        hf.frequencies(RopeSpec(128, 32, 5e5, "half", scaling={"rope_type": "yarn", "factor": 4.0}), 0)


# ------------------------------------------------------------------------------------------
# Buggy examples graded by diagnose(): (file, code, spec, position sets that reveal it)

LLAMA3 = RopeSpec(128, 128, 5e5, "half")
NEOX = RopeSpec(128, 32, 1e4, "half")
NUMERIC_BUGS = [
    ("layout_swapped.py", "layout-swapped", RopeSpec(128, 128, 5e5, "interleaved"), POSITION_SETS),
    ("rotation_reversed.py", "rotation-reversed", LLAMA3, POSITION_SETS),
    ("position_offset.py", "position-offset", LLAMA3, POSITION_SETS),
    ("positions_ignored.py", "positions-ignored", LLAMA3,
     {k: v for k, v in POSITION_SETS.items() if k != "prefill"}),
    ("wrong_base.py", "wrong-base", LLAMA3, POSITION_SETS),
    ("frequency_exponent.py", "frequency-exponent", LLAMA3, POSITION_SETS),
    ("angle_precision.py", "angle-precision", LLAMA3, POSITION_SETS),
    ("pair_angle_mismatch.py", "pair-angle-mismatch", LLAMA3, POSITION_SETS),
    ("rotary_dim_mismatch.py", "rotary-dim-mismatch", NEOX, POSITION_SETS),
    ("attention_factor.py", "attention-factor", LLAMA3, POSITION_SETS),
    ("scaling_mismatch.py", "scaling-mismatch", LLAMA3, POSITION_SETS),
]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("path,code,spec,position_sets", NUMERIC_BUGS, ids=[b[0] for b in NUMERIC_BUGS])
def test_buggy_example_gets_its_code_from_diagnose(path, code, spec, position_sets, dtype):
    fn = load("buggy/" + path).apply
    for name, pos in position_sets.items():
        case = make_case(spec, pos, name=name, seed=3)
        inputs, out = run_case(fn, case, spec, dtype)
        got = diagnose(case, spec, inputs, out, dtype)
        assert [d.code for d in got] == [code], (name, got)
        assert got[0].message and "\n" not in got[0].message


def test_messages_name_the_fault():
    def message(path, spec, pos):
        case = make_case(spec, pos, seed=5)
        inputs, out = run_case(load("buggy/" + path).apply, case, spec, "float32")
        return diagnose(case, spec, inputs, out, "float32")[0].message

    pos = POSITION_SETS["left-padded"]
    assert message("position_offset.py", LLAMA3, pos).startswith("positions shifted by +1")
    assert message("frequency_exponent.py", LLAMA3, pos).startswith(
        "inv_freq uses base**(-i/d) instead of base**(-2i/d)")
    assert message("angle_precision.py", LLAMA3, pos).startswith("angles computed in bfloat16")
    assert "error grows with position" in message("angle_precision.py", LLAMA3, pos)
    assert message("pair_angle_mismatch.py", LLAMA3, pos).startswith(
        "the two elements of a pair are rotated by different angles")
    assert message("wrong_base.py", LLAMA3, pos).startswith("base 10000 used instead of 500000")
    assert "1.208" in message("attention_factor.py", LLAMA3, pos)
    assert "divided by 2" in message("scaling_mismatch.py", LLAMA3, pos)
    # The effective frequency recovered from the output is reported where it departs.
    assert "pair 1 is the first that turns by another angle per position" in message("wrong_base.py", LLAMA3, pos)


def test_buggy_examples_agree_with_the_reference_where_the_bug_does_not_apply():
    """Each numeric bug is specific: away from its trigger the example is correct (no code)."""
    spec = RopeSpec(128, 128, 1e4, "half")  # base 1e4 and full rotary
    for path in ("wrong_base.py", "rotary_dim_mismatch.py"):
        case = make_case(spec, POSITION_SETS["left-padded"])
        inputs, out = run_case(load("buggy/" + path).apply, case, spec, "float32")
        assert diagnose(case, spec, inputs, out, "float32") == []
    case = make_case(spec, POSITION_SETS["prefill"])
    inputs, out = run_case(load("buggy/positions_ignored.py").apply, case, spec, "float32")
    assert diagnose(case, spec, inputs, out, "float32") == []


# ------------------------------------------------------------------------------------------
# Buggy examples graded by the black-box checks

BLACKBOX_BUGS = [
    ("input_mutated.py", "input-mutated", "inputs-not-mutated", "float32"),
    ("dtype_changed.py", "dtype-changed", "dtype-preserved", "bfloat16"),
    ("shape_changed.py", "shape-changed", "shape-preserved", "float32"),
    ("non_finite.py", "non-finite", "norm-per-pair", "float32"),
    ("raised.py", "raised", "norm-per-pair", "float32"),
    ("not_deterministic.py", "not-deterministic", "determinism", "bfloat16"),
    ("position_offset.py", "position-offset", "position-zero", "float32"),
    ("positions_ignored.py", "positions-ignored", "position-zero", "bfloat16"),
    ("attention_factor.py", "attention-factor", "norm-per-pair", "bfloat16"),
    ("pair_angle_mismatch.py", "pair-angle-mismatch", "norm-per-pair", "float32"),
    ("angle_precision.py", "angle-precision", "shift-invariance", "bfloat16"),
]


@pytest.mark.parametrize("path,code,check,dtype", BLACKBOX_BUGS, ids=[b[0] + "-" + b[2] for b in BLACKBOX_BUGS])
def test_buggy_example_gets_its_code_from_blackbox(path, code, check, dtype):
    invoker = make_invoker(load("buggy/" + path).apply, None, isolate=False, timeout=None)
    results = {r.id: r for r in run_blackbox(invoker, "rope.apply", dtype=DTYPES[dtype], device="cpu",
                                             layout="half")}
    hit = results["rope.apply/" + check]
    assert hit.verdict in ("fail", "error"), hit
    assert code in [d.code for d in hit.diagnoses], hit


def test_layout_swapped_fails_norm_per_pair_in_the_declared_layout():
    invoker = make_invoker(load("buggy/layout_swapped.py").apply, None, isolate=False, timeout=None)
    results = run_blackbox(invoker, "rope.apply", dtype=torch.float32, device="cpu", layout="interleaved")
    norm = next(r for r in results if r.id.endswith("norm-per-pair"))
    assert norm.verdict == "fail" and [d.code for d in norm.diagnoses] == ["layout-swapped"]
    # Followed in its own layout it is correct.
    results = run_blackbox(invoker, "rope.apply", dtype=torch.float32, device="cpu", layout="half")
    assert all(r.verdict == "pass" for r in results)


def test_timeout_example_times_out_and_later_checks_are_skipped():
    invoker = make_invoker(load("buggy/timeout.py").apply, None, isolate=False, timeout=0.3)
    results = run_blackbox(invoker, "rope.apply", dtype=torch.float32, device="cpu", layout="half")
    codes = {d.code for r in results for d in r.diagnoses}
    assert codes == {"timeout"}
    assert any(r.verdict == "skip" and "timed out" in r.message for r in results)


def test_crashed_example_is_a_crash_under_isolation():
    invoker = make_invoker(None, str(EXAMPLES / "buggy" / "crashed.py") + ":apply", isolate=True, timeout=60)
    try:
        results = run_blackbox(invoker, "rope.apply", dtype=torch.float32, device="cpu", layout="half")
    finally:
        invoker.close()
    crashed = [r for r in results if "crashed" in [d.code for d in r.diagnoses]]
    assert crashed and all(r.verdict == "error" for r in crashed)
    assert any(r.verdict == "skip" and "crashed" in r.message for r in results)


def test_every_buggy_example_is_covered_and_documents_its_code():
    files = sorted(p.name for p in (EXAMPLES / "buggy").glob("*.py") if p.name != "__init__.py")
    covered = {b[0] for b in NUMERIC_BUGS} | {b[0] for b in BLACKBOX_BUGS} | {"crashed.py", "timeout.py",
                                                                               "layout_swapped.py"}
    # The scaled-case bugs are graded end to end by the family contract test (and tests/rope/
    # test_scaling.py grades the same mistakes): their code is the module's CODE.
    covered |= {"static_ntk.py", "yarn_factor_twice.py"}
    # Issue 23's named causes are graded end to end in tests/rope/test_named_causes.py.
    covered |= {"cos_sin_as_angles.py", "dynamic_ntk_fixed_length.py", "yarn_ramp_reversed.py",
                "output_deinterleaved.py", "output_scaled.py"}
    # The serving-shape bugs are graded in tests/rope/test_shapes.py and test_apply_qk.py.
    covered |= {"batch_row_zero_only.py", "positions_from_heads_axis.py", "tile_tail_unrotated.py",
                "k_unrotated.py"}
    # The stateful-module bugs are graded in tests/rope/test_module_protocol.py (under --grad and
    # --autocast also in test_module_grad.py), the training bugs in tests/core/test_training.py and
    # tests/rope/test_rope_grad.py.
    covered |= {"module_dynamic_stale.py", "module_length_keyed_cache.py", "module_longrope_switch.py",
                "module_persistent_inv_freq.py", "module_backward_transposed.py", "module_autocast_bf16_angles.py",
                "backward_transposed.py", "backward_layout.py",
                "backward_missing.py", "backward_scale.py", "autocast_bf16_angles.py"}
    # The context-parallel gather's bugs are graded in tests/rope/test_cp_positions.py.
    covered |= {"cp_apply_chunk_restart.py", "cp_chunk_restart.py", "cp_positions_global.py", "cp_sequence_offset.py",
                "cp_split_swapped.py", "cp_wrong_chunks.py"}
    # The compile-only fault is graded under --compile in tests/core/test_compile.py.
    covered |= {"compile_fault.py"}
    # The fused serving operations' bugs are graded in tests/rope/test_kv_write.py and test_apply_qk_fp8.py.
    covered |= {"kv_written_unrotated.py", "kv_wrong_slot.py", "kv_padding_written.py", "kv_value_rotated.py",
                "fp8_scale_inverted.py", "fp8_not_saturated.py", "fp8_layout_swapped.py"}
    # QK-norm then RoPE's bugs are graded in tests/rope/test_qk_norm.py.
    covered |= {"norm_after_rope.py", "norm_scope.py"}
    # The bugs of adapters in other array libraries (--framework) are graded in tests/core/test_frameworks.py.
    covered |= {"jax_rotation_reversed.py", "jax_backward_transposed.py"}
    assert set(files) == covered
    for name in files:
        module = load("buggy/" + name)
        code = getattr(module, "CODE", name[:-3].replace("_", "-"))
        assert module.__doc__ and f"``{code}``" in module.__doc__, name


# ------------------------------------------------------------------------------------------
# rope.cache and rope.frequencies adapters of the examples

CACHE_BUGS = [("wrong_base.py", "wrong-base"), ("frequency_exponent.py", "frequency-exponent"),
              ("attention_factor.py", "attention-factor"), ("position_offset.py", "position-offset"),
              ("angle_precision.py", "angle-precision"), ("rotation_reversed.py", "rotation-reversed")]
FREQUENCY_BUGS = [("wrong_base.py", "wrong-base"), ("frequency_exponent.py", "frequency-exponent"),
                  ("attention_factor.py", "attention-factor"), ("scaling_mismatch.py", "scaling-mismatch"),
                  ("rotary_dim_mismatch.py", "rotary-dim-mismatch")]


def cache_case(spec, pos):
    params = {"head_dim": spec.head_dim, "rotary_dim": spec.rotary_dim, "base": spec.base, "layout": spec.layout,
              "scaling": None, "seq_len": int(pos.shape[1])}
    c, s = rr.cos_sin(pos, spec.rotary_dim, spec.base)
    return GoldenCase(id="rope.cache/test/x", protocol="rope.cache", group="test", params=params, comment="",
                      flags=[], arrays={"positions": pos, "cos": c, "sin": s})


@pytest.mark.parametrize("path,code", [("hf_rotate_half.py", None)] + CACHE_BUGS)
def test_cache_adapters(path, code):
    spec = RopeSpec(128, 32, 5e5, "half")
    for pos in (POSITION_SETS["left-padded"], POSITION_SETS["mid"]):
        case = cache_case(spec, pos)
        cos, sin = load(("" if code is None else "buggy/") + path).cache(torch.from_numpy(pos), spec)
        out = np.stack([cos.double().numpy(), sin.double().numpy()])  # the runner's stacked form
        got = [d.code for d in diagnose(case, spec, {"positions": pos}, out, "float32")]
        assert got == ([] if code is None else [code]), (path, pos[0, :2], got)


@pytest.mark.parametrize("path,code", [("hf_rotate_half.py", None)] + FREQUENCY_BUGS)
def test_frequency_adapters(path, code):
    spec = RopeSpec(128, 32, 5e5, "half")
    case = GoldenCase(id="rope.frequencies/test/x", protocol="rope.frequencies", group="test",
                      params={}, comment="", flags=[], arrays={})
    inv, factor = load(("" if code is None else "buggy/") + path).frequencies(spec, 4096)
    out = np.concatenate([inv.double().numpy(), [factor]])  # the runner's concatenated form
    got = [d.code for d in diagnose(case, spec, {}, out, "float32")]
    assert got == ([] if code is None else [code])
