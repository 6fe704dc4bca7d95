"""Hand-made reports shared by the report tests, and tests of the shared helpers.

The other tests/core/test_reports_*.py import ``sample_report`` from here (pytest puts tests/ on
sys.path since it has no __init__.py).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from conformance.reports import citation, summary_line, write_reports
from conformance.reports._common import case_reason, fmt_float, short_digest
from conformance.results import CaseResult, Diagnosis, IdentityResult, Report

DIGEST = "sha256:" + "0123456789abcdef" * 4


def _curve(positions, rel_err, u):
    """[position, max_error, max_budget, max_ratio] with a budget growing like the float32 angle
    rounding, and an element ratio a little above the envelope ratio (as real cases have)."""
    out = []
    for m in positions:
        err, budget = rel_err * (1 + 2.0**-24 * m * 4 / u) * u, (2 * u + 4 * 2.0**-24 * m) * 3.0
        out.append([int(m), err, budget, 1.5 * err / budget])
    return out


def sample_report(**overrides) -> Report:
    """A report with one case of every verdict, a non-finite case, and odd characters."""
    short = list(range(16))
    long = [2047, 2048, 4095, 65535, 2**20, 2**24 - 1]
    cases = [
        CaseResult("rope.apply/llama2-d128/prefill-0-15", "float32", "pass", 2.1e-7, 0.41,
                   [0, 3, 1, 70], repro="posref vectors show rope.apply/llama2-d128/prefill-0-15",
                   duration_s=0.012, curve=_curve(short, 0.3, 2.0**-24)),
        CaseResult("rope.apply/llama2-d128/prefill-0-15", "bfloat16", "pass", 7.8e-3, 0.62,
                   [0, 5, 0, 3], duration_s=0.010, curve=_curve(short, 0.5, 2.0**-8)),
        CaseResult("rope.apply/llama2-d128/decode-4095", "bfloat16", "fail", 1.37, 812.5,
                   [0, 0, 7, 1], [Diagnosis("position-offset", "positions shifted by +1")],
                   repro="import torch\n# reproduce decode-4095\nprint('x')", duration_s=0.02,
                   curve=[[4095, 1.37, 1.37 / 0.33, 812.5]]),
        CaseResult("rope.apply/long/near-2p24", "float32", "acceptable", 0.9, 0.97, [0, 1, 0, 0],
                   notes=["budget too wide to tell m from m+1"], duration_s=0.03,
                   curve=_curve(long, 0.5, 2.0**-24)),
        CaseResult("rope.apply/gptj-d256/partial-64", "float32", "skip",
                   notes=["Unsupported: partial rotary is not supported"]),
        CaseResult("rope.apply/llama2-d128/left-pad", "bfloat16", "error",
                   diagnoses=[Diagnosis("raised", "ZeroDivisionError: division by zero")],
                   duration_s=0.001),
        CaseResult("rope.apply/llama2-d128/decode-65535", "float16", "fail", math.nan, math.inf,
                   [0, 0, 0, 0], [Diagnosis("non-finite", "the output holds NaN or Inf")],
                   curve=[[65535, math.inf, 0.01, math.inf], [65536, math.nan, 0.01, math.inf]]),
    ]
    identities = [
        IdentityResult("norm-per-pair", "float32", "pass", 1.2e-7, 4.8e-7),
        IdentityResult("shift-invariance", "bfloat16", "fail", 0.3, 0.05,
                       "q.k changes under a common shift <&> | \x00 of 1",
                       [Diagnosis("position-offset", "positions shifted by +1")]),
        IdentityResult("determinism", "float32", "skip", message="single-threaded target"),
    ]
    fields = dict(
        suite_version="0.1.0",
        vectors_digest=DIGEST,
        protocol="rope.apply",
        target="examples/rope_buggy.py:apply_offset",
        environment={"python": "3.11.9", "torch": "2.13.0+cpu", "numpy": "2.4.0",
                     "numba": "0.68.1", "device": "cpu",
                     "dtypes": ["float32", "bfloat16", "float16"]},
        profile="standard",
        probe={"summary": "detected layout: half", "detected_layout": "half", "declared_layout": "auto",
               "follows": {"half": "half", "interleaved": "half"}, "reason": None},
        cases=cases,
        identities=identities,
    )
    fields.update(overrides)
    return Report(**fields)


def passing_report() -> Report:
    r = sample_report()
    r.cases = [c for c in r.cases if c.verdict in ("pass", "skip", "acceptable")]
    r.identities = [i for i in r.identities if i.verdict == "pass"]
    return r


# ---------------------------------------------------------------------------------------------


def test_summary_line_counts_and_digest():
    line = summary_line(sample_report())
    assert line == ("posref 0.1.0 rope.apply: 2 passed, 1 acceptable, 2 failed, 1 error, "
                    "1 skipped, 1 identity failed (vectors sha256:0123456789abcdef...)")
    full = summary_line(sample_report(), digest_chars=None)
    assert full.endswith(f"(vectors {DIGEST})")


def test_summary_line_omits_zero_counts_but_not_passed():
    r = sample_report(cases=[], identities=[])
    assert summary_line(r).startswith("posref 0.1.0 rope.apply: 0 passed (vectors")
    assert "failed" not in summary_line(passing_report())


def test_citation_line():
    r = sample_report()
    assert citation(r, r.cases[2]) == (
        "posref 0.1.0 rope.apply/llama2-d128/decode-4095 [bfloat16]: fail "
        "(positions shifted by +1)")
    # without diagnoses a case is cited by its ratio or, when skipped, by its note
    assert case_reason(r.cases[0]) == "budget ratio 0.41"
    assert case_reason(r.cases[4]) == "Unsupported: partial rotary is not supported"


@pytest.mark.parametrize(
    "value, text",
    [(None, "-"), (0.0, "0"), (0.41, "0.41"), (812.5, "812"), (1203.4, "1203"), (74.44, "74.4"), (1.5e-7, "1.50e-07"),
     (math.inf, "inf"), (-math.inf, "-inf"), (math.nan, "nan"), (np.float32(2.5), "2.5"),
     (123456.0, "1.23e+05")],
)
def test_fmt_float(value, text):
    assert fmt_float(value) == text


def test_short_digest():
    assert short_digest(DIGEST, 8) == "sha256:01234567..."
    assert short_digest("sha256:abcd", 8) == "sha256:abcd"
    assert short_digest("deadbeef" * 8, 4) == "dead..."
    assert short_digest("", 4) == "?"


def test_write_reports_writes_each_given_kind(tmp_path):
    r = sample_report()
    written = write_reports(r, json=tmp_path / "r.json", junit=tmp_path / "r.xml",
                            markdown=tmp_path / "r.md", plot=None)
    assert [p.name for p in written] == ["r.json", "r.xml", "r.md"]
    assert all(p.stat().st_size > 0 for p in written)
    assert not (tmp_path / "r.png").exists()
    with pytest.raises(ValueError, match="html"):
        write_reports(r, html=tmp_path / "r.html")


def test_importing_the_writers_loads_no_heavy_dependency():
    # `posref --help` and friends must stay fast: torch, matplotlib, rich and jsonschema load
    # only when a report is actually written.
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import conformance.isolation, conformance.reports\n"
        "from conformance.reports import json_report, junit, markdown, plot, terminal\n"
        "print(sorted(m for m in ('torch', 'matplotlib', 'rich', 'jsonschema') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
