"""ALiBi computed in float32 by well-kept libraries passes for every head count (issue 23, sec. 2):
transformers' BLOOM ``build_alibi_tensor`` (pow(base, k) in float32: 1.13 budgets at 116 heads,
1.42 at 128 under the old flat budget) and MLX's ``create_alibi_slope`` (x = 256^(1/n) rounded to
float32, then x^-k: up to 12.5 budgets at 128 heads). The allowance K_h u_32 (conformance/alibi/
slopes.py) admits them; the buggy examples keep failing with their codes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conformance import run_conformance
from reference import alibi
from reference.golden import store

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "alibi"
HEADS = range(1, 129)  # fresh slope cases draw 1..128; the catalog's 8..96 are among them


def slope_cases(heads):
    return [store.GoldenCase(f"alibi.slopes/sweep/heads-{n}", "alibi.slopes", "sweep",
                             {"num_heads": n, "causal": True}, f"{n} heads", [],
                             {"expected": alibi.slopes(n, mode="golden")}) for n in heads]


def bias_cases(heads, qp, kp):
    qp, kp = np.array(qp, dtype=np.int64), np.array(kp, dtype=np.int64)
    return [store.GoldenCase(f"alibi.bias/sweep/heads-{n}", "alibi.bias", "sweep", {"num_heads": n, "causal": True},
                             f"{n} heads", [], {"q_positions": qp, "k_positions": kp,
                                                "expected": alibi.bias(n, qp, kp, causal=True, mode="golden")})
            for n in heads]


def graded(target, protocol, cases):
    report = run_conformance(target, protocol, golden_cases=cases, identities=False, fresh=False, timeout=60.0)
    return [c for c in report.cases if c.verdict != "skip"]


def test_transformers_bloom_slopes_pass_for_every_head_count():
    pytest.importorskip("transformers")
    results = graded(f"{EXAMPLES / 'lib_transformers.py'}:slopes", "alibi.slopes", slope_cases(HEADS))
    assert len(results) == len(HEADS)
    assert [c.id for c in results if c.verdict == "fail"] == []
    # float32 intermediates: within standard, over strict's float64 allowance somewhere
    assert max(c.budget_ratio for c in results) < 1


def test_transformers_bloom_bias_passes_far_from_the_origin():
    pytest.importorskip("transformers")
    cases = bias_cases((8, 12, 16, 24, 32, 116, 128), (4095, 70000), (0, 1, 4092, 4095, 69990, 70000))
    results = graded(f"{EXAMPLES / 'lib_transformers.py'}:bias", "alibi.bias", cases)
    assert len(results) == len(cases) and all(c.verdict != "fail" for c in results)


def bloom_passes(seed):
    for adapter, protocol in (("slopes", "alibi.slopes"), ("bias", "alibi.bias")):
        report = run_conformance(f"{EXAMPLES / 'lib_transformers.py'}:{adapter}", protocol, seed=seed, timeout=60.0)
        assert report.summary()["overall"] in ("pass", "acceptable"), (protocol, seed)


@pytest.mark.parametrize("seed", range(3))
def test_transformers_bloom_passes_the_catalog_and_fresh_cases(seed):
    pytest.importorskip("transformers")
    bloom_passes(seed)


@pytest.mark.slow
def test_transformers_bloom_seed_sweep():
    pytest.importorskip("transformers")
    for seed in range(3, 53):
        bloom_passes(seed)


def test_mlx_float32_slopes_pass_at_powers_of_two():
    powers = [n for n in HEADS if n & (n - 1) == 0]
    results = graded(f"{EXAMPLES / 'mlx_float32.py'}:slopes", "alibi.slopes", slope_cases(powers))
    assert len(results) == len(powers) and all(c.verdict != "fail" for c in results)
    assert any(c.verdict == "acceptable" for c in results)  # float32: over strict's float64 allowance


def test_mlx_as_shipped_names_the_power_of_two_rule_at_other_counts():
    results = graded(f"{EXAMPLES / 'mlx_float32.py'}:slopes_any_count", "alibi.slopes", slope_cases((12, 20, 96)))
    assert results and all(c.verdict == "fail" for c in results)
    assert all("slopes-power-of-two-rule" in [d.code for d in c.diagnoses] for c in results)


def test_the_allowance_is_the_ladder_power():
    from conformance.alibi.slopes import ladder_powers

    assert ladder_powers(8).tolist() == list(range(1, 9))
    assert ladder_powers(12).tolist() == list(range(1, 9)) + [1, 3, 5, 7]
    assert ladder_powers(1).tolist() == [1]
