"""rope.apply_qk_fp8: RoPE then float8 e4m3 quantisation with per-tensor scales (issue 28, "Fused
operations").

The e4m3 rounding functions against torch's cast (and what that cast does past 448), the committed
vectors, the derived budget on a correct implementation over many drawn cases, on transformers'
rotate_half followed by a cast, on garbage, against a flat rtol, and each buggy example's diagnosis.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from conformance import run_conformance  # noqa: E402
from conformance.core import registry  # noqa: E402
from conformance.rope import fp8_grading  # noqa: E402
from reference import rope as rr  # noqa: E402
from reference.golden import store  # noqa: E402
from reference.golden.fresh import fresh_cases  # noqa: E402
from reference.rope import fp8  # noqa: E402
from support import load_file  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "rope" / "fp8_quantize.py"
BUGGY = ROOT / "examples" / "rope" / "buggy"
PROTO = registry.get("rope.apply_qk_fp8")
CORRECT = load_file(EXAMPLE).apply_qk_fp8
E4M3 = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).double().numpy()
GRID = np.unique(E4M3[np.isfinite(E4M3)])


def _grade(adapter, case, dtype="float32"):
    spec = PROTO.spec(case)
    prepared = PROTO.prepare(case, spec, dtype, "cpu")
    return PROTO.grade(case, spec, prepared, adapter(*prepared.args)), prepared, spec


def _passes(graded) -> bool:
    return not graded.problems and graded.ratio["standard"] is not None and graded.ratio["standard"] <= 1.0


def _torch_saturates() -> bool:
    return float(torch.tensor([1000.0]).to(torch.float8_e4m3fn).float()) == 448.0


def test_protocol_is_registered():
    assert PROTO.signature == "fn(q, k, positions, spec) -> (q8, k8)" and PROTO.arity == 4
    assert {"fp8-scale-inverted", "fp8-not-saturated"} <= set(registry.families()["rope"].codes)
    assert not PROTO.differentiable


def test_rounding_functions_agree_with_torch_and_bracket_their_input():
    rng = np.random.default_rng(0)
    v = rng.standard_normal(100_000) * np.exp(rng.uniform(-12.0, 6.5, 100_000))
    v = np.concatenate([v, GRID, (GRID[1:] + GRID[:-1]) / 2, [2.0**-10, 3 * 2.0**-10, 448.0, -448.0, 0.0]])
    inside = np.abs(v) <= 448
    got = torch.from_numpy(v[inside]).to(torch.float8_e4m3fn).double().numpy()
    assert np.array_equal(fp8.round_nearest(v[inside]), got)  # ties to even, subnormals included
    down, up = fp8.round_down(v), fp8.round_up(v)
    assert np.all(np.isin(down, GRID)) and np.all(np.isin(up, GRID))
    assert np.all(down[inside] <= v[inside]) and np.all(up[inside] >= v[inside])
    assert np.all(up[inside] - down[inside] <= fp8.spacing(v[inside]))
    assert np.all(fp8.round_up(np.array([449.0, 1e6])) == 448) and np.all(fp8.round_down(np.array([-449.0])) == -448)


def test_torch_cast_past_448_is_what_the_docs_say():
    """torch 2.13 (installed) saturates, inf included; torch 2.11's eager cast gives NaN from 465 up."""
    v = torch.tensor([460.0, 464.0, 465.0, 1000.0, float("inf"), -1000.0])
    got = v.to(torch.float8_e4m3fn).float()
    if _torch_saturates():
        assert got.tolist() == [448.0, 448.0, 448.0, 448.0, 448.0, -448.0]
    else:
        assert got[:2].tolist() == [448.0, 448.0] and torch.isnan(got[2:]).all()


def test_vectors_are_certified_rotations_with_meaningful_scales():
    cases = list(store.iter_cases("rope.apply_qk_fp8"))
    assert len(cases) == 6
    kinds = set()
    for c in cases:
        p, a = c.params, c.arrays
        assert 16 <= p["head_dim"] <= 64
        for role in ("q", "k"):
            want = rr.apply(a[role], a["positions"], rotary_dim=p["rotary_dim"], base=p["base"], layout=p["layout"],
                            backend="numpy")
            np.testing.assert_allclose(a[f"{role}_expected"], want, rtol=0, atol=1e-12)
            scale = p[f"{role}_scale"]
            assert float(torch.tensor(scale, dtype=torch.bfloat16)) == scale
            y = np.abs(a[f"{role}_expected"]) / scale
            if c.id.endswith("saturating"):
                assert np.mean(y > 448) > 0.01
                kinds.add("saturating")
            elif c.id.endswith("subnormal"):
                assert np.mean(y < fp8.E4M3_MIN_NORMAL) > 0.3 and np.any(y < 2.0**-10)
                kinds.add("subnormal")
            else:
                assert 100 < y.max() < 448
                kinds.add("in-range")
    assert kinds == {"saturating", "subnormal", "in-range"}


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
def test_correct_example_passes_fifty_drawn_cases(dtype):
    for seed in range(50):
        (case,) = fresh_cases("rope.apply_qk_fp8", seed)
        graded, _, _ = _grade(CORRECT, case, dtype)
        assert _passes(graded), (seed, graded.problems, graded.ratio)


def test_correct_example_and_a_plain_cast_pass_the_catalog():
    report = run_conformance(f"{EXAMPLE}:apply_qk_fp8", "rope.apply_qk_fp8",
                             dtypes=("float64", "float32", "float16", "bfloat16"), seed=0)
    assert report.summary()["overall"] == "pass" and not [c for c in report.cases if c.verdict == "skip"]

    def plain_cast(q, k, positions, spec):  # no clamp: right only where the cast saturates
        q_rot, k_rot = load_file(EXAMPLE).rotate(q, positions, spec), load_file(EXAMPLE).rotate(k, positions, spec)
        return (q_rot / spec.q_scale).to(torch.float8_e4m3fn), (k_rot / spec.k_scale).to(torch.float8_e4m3fn)

    codes = {d.code for c in run_conformance(plain_cast, "rope.apply_qk_fp8", dtypes=("float32",), fresh=False)
             .cases for d in c.diagnoses}
    assert codes == (set() if _torch_saturates() else {"non-finite", "fp8-not-saturated"})


def _hf_then_cast():
    """transformers' apply_rotary_pos_emb (rotate_half, tables cast to the model dtype as HF does),
    then the division by the scale and a saturating cast, in the model dtype."""
    pytest.importorskip("transformers")
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    from conformance import Unsupported

    def hf(q, k, positions, spec):
        if spec.layout != "half":
            raise Unsupported("rotate_half only")
        r = spec.rotary_dim
        inv_freq = 1.0 / (spec.base ** (torch.arange(0, r, 2, dtype=torch.int64).float() / r))
        freqs = positions[..., None].float() * inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().to(q.dtype), emb.sin().to(q.dtype)
        q_rot, k_rot = apply_rotary_pos_emb(q.transpose(1, 2), k.transpose(1, 2), cos, sin)
        return tuple((x.transpose(1, 2) / s).clamp(-448, 448).to(torch.float8_e4m3fn)
                     for x, s in ((q_rot, spec.q_scale), (k_rot, spec.k_scale)))

    return hf


def test_transformers_rotate_half_then_a_cast_passes_the_catalog():
    report = run_conformance(_hf_then_cast(), "rope.apply_qk_fp8", dtypes=("float32", "float16", "bfloat16"),
                             fresh=False)
    graded = [c for c in report.cases if c.verdict != "skip"]
    assert len(graded) == 9 and all(c.verdict in ("pass", "acceptable") for c in graded)


@pytest.mark.slow  # 100 gradings through transformers (about 8 s)
def test_transformers_rotate_half_then_a_cast_passes_fifty_drawn_cases():
    hf, n = _hf_then_cast(), 0
    for seed in range(50):
        (case,) = fresh_cases("rope.apply_qk_fp8", seed)
        if case.params["layout"] == "half":
            for dtype in ("bfloat16", "float16"):
                graded, _, _ = _grade(hf, case, dtype)
                assert _passes(graded), (seed, dtype, graded.ratio)
                n += 1
    assert n >= 40


def test_garbage_fails():
    for case in store.iter_cases("rope.apply_qk_fp8"):
        def zeros(q, k, positions, spec):
            return (torch.zeros(q.shape, dtype=torch.float8_e4m3fn), torch.zeros(k.shape, dtype=torch.float8_e4m3fn))

        def unrotated(q, k, positions, spec):
            return CORRECT(q, k, torch.zeros_like(positions), spec)

        for adapter in (zeros, unrotated):
            graded, _, _ = _grade(adapter, case)
            assert not _passes(graded), (case.id, adapter.__name__)

    case = next(store.iter_cases("rope.apply_qk_fp8"))
    graded, _, _ = _grade(lambda q, k, positions, spec: tuple(x.float() for x in CORRECT(q, k, positions, spec)), case)
    assert {d.code for d in graded.problems} == {"dtype-changed"}


def test_budget_is_the_e4m3_bracket_of_the_rope_budget():
    """The exact quantised value is always accepted; one e4m3 step past either end never is."""
    for case in store.iter_cases("rope.apply_qk_fp8"):
        spec = PROTO.spec(case)
        x, pos = case.arrays["q"], case.arrays["positions"]
        rotated = case.arrays["q_expected"]
        for dtype in ("float64", "bfloat16"):
            b = fp8_grading.element_budget(x, pos, spec, dtype, "standard")
            target, low, high = fp8_grading.accepted(rotated, b, spec.q_scale, dtype, "standard")
            exact = fp8.quantize(rotated, spec.q_scale)
            assert np.all(fp8_grading.ratios(exact, target, low, high) <= 1.0)
            below, above = fp8.round_down(low - 2.0**-12 * fp8.spacing(low)), fp8.round_up(high + 2.0**-12 * fp8.spacing(high))
            ok = below < low
            assert np.all(fp8_grading.ratios(below[ok], target[ok], low[ok], high[ok]) > 1.0)
            ok = above > high
            assert np.all(fp8_grading.ratios(above[ok], target[ok], low[ok], high[ok]) > 1.0)


def test_a_flat_rtol_is_wrong_both_ways():
    """FlashInfer grades RoPE + fp8 at rtol 0.2: it rejects a correctly rounded subnormal and accepts a
    value two e4m3 steps off near 400, where the derived budget does the opposite."""
    case = next(c for c in store.iter_cases("rope.apply_qk_fp8") if c.id.endswith("d64-half-subnormal"))
    spec = PROTO.spec(case)
    x, pos, rotated = case.arrays["q"], case.arrays["positions"], case.arrays["q_expected"]
    b = fp8_grading.element_budget(x, pos, spec, "float32", "standard")
    target, low, high = fp8_grading.accepted(rotated, b, spec.q_scale, "float32", "standard")
    exact = fp8.quantize(rotated, spec.q_scale)
    y = rotated / spec.q_scale
    rtol_rejects = np.abs(exact - y) > 0.2 * np.abs(y)
    assert rtol_rejects.any() and np.all(fp8_grading.ratios(exact, target, low, high)[rtol_rejects] <= 1.0)
    y = np.array([400.0])  # e4m3 values near it: 384, 416, 448 (spacing 32)
    two_off = np.array([352.0])
    assert abs(two_off[0] - y[0]) <= 0.2 * y[0]
    assert fp8_grading.ratios(two_off, y, fp8.round_down(y - 1.0), fp8.round_up(y + 1.0))[0] > 1.0


@pytest.mark.parametrize("name, code, words", [
    ("fp8_scale_inverted", "fp8-scale-inverted", "multiplied by the scale"),
    ("fp8_not_saturated", "fp8-not-saturated", "came back NaN"),
    ("fp8_layout_swapped", "layout-swapped", "half layout"),
])
def test_buggy_examples_are_named_on_every_failing_case(name, code, words):
    module = load_file(BUGGY / f"{name}.py")
    assert (module.CODE, module.PROTOCOL) == (code, "rope.apply_qk_fp8")
    report = run_conformance(f"{BUGGY / name}.py:apply_qk_fp8", "rope.apply_qk_fp8", dtypes=("float32",), seed=2)
    failing = [c for c in report.cases if c.verdict == "fail"]
    assert failing
    for c in failing:
        named = [d for d in c.diagnoses if d.code == code]
        assert named and words in named[0].message, (c.id, c.diagnoses)
    if code == "fp8-not-saturated":  # only the saturating cases fail
        assert all("saturating" in c.id or "/fresh/" in c.id for c in failing)


def test_float8_answers_cross_the_isolation_wire_bit_for_bit():
    from conformance import wire

    x = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).reshape(4, 64)
    (back,) = wire.loads(wire.dumps((x,)))
    assert back.dtype == torch.float8_e4m3fn and torch.equal(back.view(torch.uint8), x.view(torch.uint8))


@pytest.mark.slow  # starts an isolated interpreter (about 9 s)
def test_isolated_run_grades_float8_answers():
    report = run_conformance(f"{EXAMPLE}:apply_qk_fp8", "rope.apply_qk_fp8", dtypes=("bfloat16",), fresh=False,
                             isolate=True)
    assert len(report.cases) == 6 and {c.verdict for c in report.cases} <= {"pass", "acceptable"}


def test_rope_faults_are_named_through_the_float8_rounding():
    """The rotation of a known bug, quantised exactly, gets rope.apply's code on every catalog case
    (saturated and subnormal ones included); a correct quantised rotation gets none."""
    import dataclasses

    from conformance.core import rotation_reference as reference
    from conformance.rope import fp8_diagnosis

    other = {"half": "interleaved", "interleaved": "half"}
    for case in store.iter_cases("rope.apply_qk_fp8"):
        spec = PROTO.spec(case)
        x, pos = case.arrays["k"], case.arrays["positions"]
        bugs = {"position-offset": (spec, pos + 1), "rotation-reversed": (spec, -pos),
                "positions-ignored": (spec, 0 * pos), None: (spec, pos),
                "layout-swapped": (dataclasses.replace(spec, layout=other[spec.layout]), pos)}
        for code, (s, p) in bugs.items():
            out = fp8.quantize(reference.apply(x, p, s, s.layout), spec.k_scale)
            found = [d.code for d in fp8_diagnosis.diagnose(x, pos, out, spec, "float32", spec.k_scale)]
            assert found == ([code] if code else []), (case.id, code, found)
