"""--plot: a PNG of error and budget against position, one colour per dtype."""

from __future__ import annotations

import math

import pytest

from conformance.reports import plot
from conformance.results import CaseResult
from test_reports_common import sample_report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _size(png: bytes):
    # width and height from the IHDR chunk
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def test_series_merges_per_position_and_dtype():
    r = sample_report()
    s = plot.series(r)
    assert set(s) == {"float32", "bfloat16", "float16"}
    f32 = s["float32"]
    assert f32["pos"] == sorted(f32["pos"]) and 0 in f32["pos"] and 2**24 - 1 in f32["pos"]
    b16 = s["bfloat16"]
    assert 4095 in b16["pos"]
    i = b16["pos"].index(4095)
    assert b16["ratio"][i] == pytest.approx(812.5)
    assert math.isnan(s["float16"]["err"][1]) and math.isinf(s["float16"]["ratio"][0])


def test_series_takes_the_worst_at_a_shared_position():
    r = sample_report(cases=[
        CaseResult("rope.apply/a/x", "float32", "pass", curve=[[7, 1e-6, 1e-5], [8, 1e-6, 1e-5]]),
        CaseResult("rope.apply/b/x", "float32", "fail", curve=[[7, 3e-5, 2e-5]]),
    ])
    s = plot.series(r)["float32"]
    assert s["pos"] == [7, 8]
    assert s["err"][0] == 3e-5 and s["budget"][0] == 2e-5
    assert s["ratio"][0] == pytest.approx(1.5)  # per point, not max error / max budget


def test_plot_writes_a_png(tmp_path):
    path = tmp_path / "plot.png"
    plot.write(sample_report(), path)
    png = path.read_bytes()
    assert png.startswith(PNG_MAGIC)
    w, h = _size(png)
    assert w >= 800 and h >= 600


def test_empty_curves_give_a_no_data_png(tmp_path):
    r = sample_report()
    for c in r.cases:
        c.curve = []
    path = tmp_path / "empty.png"
    plot.write(r, path)
    png = path.read_bytes()
    assert png.startswith(PNG_MAGIC)
    assert _size(png)[1] < _size(plot.render(sample_report()))[1]  # the small "no data" figure
    plot.write(sample_report(cases=[], identities=[]), tmp_path / "none.png")


def test_all_zero_or_non_finite_points_do_not_break_the_axes(tmp_path):
    r = sample_report(cases=[
        CaseResult("rope.apply/a/x", "float64", "pass", curve=[[0, 0.0, 1e-16], [1, 0.0, 1e-16]]),
        CaseResult("rope.apply/b/x", "float16", "fail", curve=[[3, math.nan, 1e-3]]),
        CaseResult("rope.apply/c/x", "float32", "pass", curve=[[-2, 1e-7, 1e-6], [2, 1e-7, 1e-6]]),
    ])
    assert plot.render(r).startswith(PNG_MAGIC)
    r.cases = [CaseResult("rope.apply/d/x", "float32", "pass", curve=[[-9, 1e-7, 1e-6]])]
    assert plot.render(r).startswith(PNG_MAGIC)


def test_plot_does_not_touch_pyplot_state():
    import sys

    plot.render(sample_report())
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:  # imported by someone else: we must not have left figures open
        assert pyplot.get_fignums() == []


def test_the_ratio_panel_shows_the_verdicts_ratio():
    """A case failing with element ratio 138 has max error / max budget 0.33 at its position; the
    panel must show 138 (the quantity the verdict uses), above the pass line."""
    r = sample_report(cases=[CaseResult("rope.apply/a/x", "bfloat16", "fail", budget_ratio=138.0,
                                        curve=[[4095, 0.033, 0.1, 138.0]])])
    assert plot.series(r)["bfloat16"]["ratio"] == [138.0]


def test_every_failing_case_is_drawn_above_the_pass_line():
    """Graded end to end: every case that fails on its numbers has a plotted point over 1, and
    no passing case has one."""
    from conformance import run_conformance
    from support import style

    report = run_conformance(style("bf16_angles"), "rope.apply", dtypes=("float32", "bfloat16"),
                             cases="rope.apply/llama2-d128/*,rope.apply/gpt-j-6b/*", identities=False)
    failing = [c for c in report.cases if c.verdict == "fail" and c.budget_ratio is not None]
    assert failing
    for case in failing:
        one = sample_report(cases=[case])
        assert max(plot.series(one)[case.dtype]["ratio"]) > 1.0, case.id
        assert max(p[3] for p in case.curve) == pytest.approx(case.budget_ratio), case.id
    for case in report.cases:
        if case.verdict in ("pass", "acceptable"):
            assert max(p[3] for p in case.curve) <= 1.0, case.id


def test_one_dtype_does_not_hide_another():
    """Issue 25: float32's points were drawn under bfloat16's in the same filled marker. Each
    dtype has its own marker, hollow, and the more precise dtype is drawn on top."""
    fig = plot.figure(sample_report())
    ax_err = fig.axes[0]
    lines = {l.get_label(): l for l in ax_err.lines}
    f32, b16 = lines["float32 error"], lines["bfloat16 error"]
    assert f32.get_marker() != b16.get_marker()
    assert f32.get_markerfacecolor() == b16.get_markerfacecolor() == "none"
    assert f32.get_zorder() > b16.get_zorder()
    assert len(set(plot.DTYPE_MARKERS.values())) == len(plot.DTYPE_MARKERS)


@pytest.mark.parametrize("protocol, target", [
    ("alibi.bias", "examples/alibi/buggy/sign_flipped.py:bias"),
    ("t5.bucket", "examples/t5/buggy/clamp_missing.py:bucket"),
    ("kerple.bias", "examples/kerple/buggy/sign_flipped.py:bias"),
    ("fire.bias", "examples/fire/buggy/one_based_positions.py:bias"),
])
def test_relative_biases_are_plotted_against_distance(protocol, target):
    """Issue 25: ALiBi, T5, KERPLE and FIRE have no positions: their curves run over the query-key
    distance (Protocol.curve_axis), so the plot draws them instead of "no per-position data", and
    no case claims a first failing *position*."""
    from pathlib import Path

    from conformance import run_conformance
    from conformance.loader import load_target

    root = Path(__file__).resolve().parents[2]
    path, _, name = target.partition(":")
    report = run_conformance(load_target(f"{root / path}:{name}"), protocol, fresh=False, identities=False)
    failing = [c for c in report.cases if c.verdict == "fail"]
    assert failing and all(c.curve for c in report.cases if c.verdict in ("pass", "fail", "acceptable"))
    assert all(c.first_failing_position is None for c in report.cases)
    assert any(p[3] > 1.0 for c in failing for p in c.curve)  # the failure shows above the pass line
    fig = plot.figure(report)
    assert "query-key distance" in fig.axes[1].get_xlabel() and "per distance" in fig.axes[0].get_ylabel()
    assert plot.render(report)[:8] == b"\x89PNG\r\n\x1a\n"
