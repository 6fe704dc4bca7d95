"""``layout-swapped`` for xpos.apply (issue 23, sec. 5): xPos on the other layout's pairs was
reported "over-budget ... centring c found"; it is now named as rope names it, both ways, in
float32 and bfloat16, and the other xPos mistakes keep their own codes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from conformance import run_conformance
from conformance.loader import load_target

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "xpos"
torchscale = load_target(f"{EXAMPLES / 'torchscale_style.py'}:apply")


def fixed_interleaved(q, k, positions, spec):
    return torchscale(q, k, positions, dataclasses.replace(spec, layout="interleaved"))


def failing(report):
    return [c for c in report.cases if c.verdict == "fail"]


@pytest.mark.parametrize("seed", [0, 1])
def test_fixed_half_layout_is_named_on_interleaved_cases(seed):
    report = run_conformance(f"{EXAMPLES / 'buggy/layout_swapped.py'}:apply", "xpos.apply", seed=seed,
                             dtypes=("float32", "bfloat16"), identities=False, timeout=60.0)
    bad = failing(report)
    verdicts = {(c.id, c.dtype): c.verdict for c in report.cases}
    assert verdicts[("xpos.apply/half-d128/prefill-8", "float32")] == "pass"
    assert {c.id for c in bad} >= {f"xpos.apply/torchscale-d64/{t}" for t in ("prefill-16", "decode-4095", "offsets")}
    assert not any(c.id.endswith("-half") for c in bad)
    assert all([d.code for d in c.diagnoses] == ["layout-swapped"] for c in bad)


def test_fixed_interleaved_layout_is_named_on_half_cases():
    report = run_conformance(fixed_interleaved, "xpos.apply", fresh=False, dtypes=("float32",), identities=False,
                             timeout=60.0)
    bad = failing(report)
    assert [c.id for c in bad] == ["xpos.apply/half-d128/prefill-8"]
    assert [d.code for d in bad[0].diagnoses] == ["layout-swapped"]
    assert "interleaved" in bad[0].diagnoses[0].message


@pytest.mark.parametrize("name, code", [("same_direction.py", "scale-direction"),
                                        ("wrong_gamma.py", "scale-parameters"),
                                        ("uncentred.py", "centring-missing")])
def test_other_mistakes_keep_their_codes(name, code):
    report = run_conformance(f"{EXAMPLES / 'buggy' / name}:apply", "xpos.apply", fresh=False, identities=False,
                             timeout=60.0)
    found = {d.code for c in failing(report) for d in c.diagnoses}
    assert code in found and "layout-swapped" not in found
