"""``--plot FILE.png``: error and budget against position (the query-key distance for relative
biases), one colour and marker per dtype.

Reads ``CaseResult.curve = [[position, max_error, max_budget, max_ratio], ...]``. For each dtype
the points of all its cases are merged per position (the largest error, budget and ratio seen
there), so the top panel shows the error envelope (solid) under the budget envelope (dashed); the
bottom panel shows the budget ratio the verdict uses (the largest per-element error / budget at
each position) against the pass line at 1, and marks every point above it with a red ring: a
failing case is always drawn above the line. Positions go on a symmetric-log axis (position 0 is common,
long-context cases reach 2^24); errors on a log axis, where exact zeros cannot be drawn (their
count is noted) and non-finite errors are marked along the top edge.

Uses matplotlib's Agg canvas directly, never pyplot, so it touches no global state.
"""

from __future__ import annotations

import io
import math

from conformance.reports._common import short_digest, summary_line, write_text_atomic

DTYPE_COLOURS = {
    "float64": "#333333",
    "float32": "#1f77b4",
    "float16": "#ff7f0e",
    "bfloat16": "#d62728",
}
_OTHER_COLOURS = ("#2ca02c", "#9467bd", "#8c564b", "#e377c2")
# One marker shape per dtype, drawn hollow, and the more precise dtype drawn on top (higher
# zorder): float32's small errors sit under bfloat16's at the same positions, and filled markers
# in one shape hid them (issue 25).
DTYPE_MARKERS = {"float64": "D", "float32": "o", "float16": "^", "bfloat16": "s"}
_OTHER_MARKERS = ("v", "P", "X", "*")
DTYPE_ZORDER = {"float64": 6, "float32": 5, "float16": 4, "bfloat16": 3}


def _as_float(v):
    if v is None:
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def series(report) -> dict:
    """{dtype: {"pos": [...], "err": [...], "budget": [...], "ratio": [...]}} merged per position,
    positions ascending. Points with a missing position are dropped."""
    merged: dict = {}
    for case in report.cases:
        for point in case.curve or ():
            if len(point) < 3 or point[0] is None:
                continue
            pos = int(point[0])
            err, budget = _as_float(point[1]), _as_float(point[2])
            if err is None:
                continue
            ratio = _as_float(point[3]) if len(point) > 3 else None
            if ratio is None:  # a curve without the element ratio: the envelope ratio
                if budget is not None and budget > 0:
                    ratio = err / budget if not math.isnan(err) else math.nan
                else:
                    ratio = math.inf if (err != 0) else 0.0
            slot = merged.setdefault(case.dtype, {}).setdefault(pos, [err, budget, ratio])
            slot[0] = _worse(slot[0], err)
            slot[1] = budget if slot[1] is None else (slot[1] if budget is None else max(slot[1], budget))
            slot[2] = _worse(slot[2], ratio)
    out = {}
    for dtype, points in merged.items():
        ordered = sorted(points.items())
        out[dtype] = {
            "pos": [p for p, _ in ordered],
            "err": [v[0] for _, v in ordered],
            "budget": [v[1] for _, v in ordered],
            "ratio": [v[2] for _, v in ordered],
        }
    return out


def _worse(a, b):
    """The larger of two errors, where NaN counts as the worst (it is a failure, not a gap)."""
    if math.isnan(a) or math.isnan(b):
        return math.nan
    return max(a, b)


def _dtype_order(report, names):
    wanted = list((report.environment or {}).get("dtypes") or [])
    known = ["float64", "float32", "float16", "bfloat16"]
    order = [d for d in wanted if d in names] + [d for d in known if d in names and d not in wanted]
    return order + sorted(n for n in names if n not in order)


def _draw_series(ax, xs, ys, colour, label, style, zorder=2):
    """Plot the positive finite part of ys on a log axis; return (number of zeros, x of non-finite)."""
    pts = [(x, y) for x, y in zip(xs, ys) if y is not None and math.isfinite(y) and y > 0]
    zero = sum(1 for y in ys if y == 0)
    bad_x = [x for x, y in zip(xs, ys) if y is not None and not math.isfinite(y)]
    if pts:
        # Break the line across wide gaps between positions (different cases, e.g. 15 and 4095):
        # a segment there would suggest data that was never measured.
        px, py = [pts[0][0]], [pts[0][1]]
        for (x0, _), (x1, y1) in zip(pts, pts[1:]):
            if abs(x1) > 2 * abs(x0) + 2:
                px.append(math.nan)
                py.append(math.nan)
            px.append(x1)
            py.append(y1)
        ax.plot(px, py, style, color=colour, label=label, markersize=5, linewidth=1.3, alpha=0.85,
                markerfacecolor="none", markeredgewidth=1.2, zorder=zorder)
    return zero, bad_x


def _axis(report) -> str:
    """"position", or "distance" for the relative biases (Protocol.curve_axis: ALiBi, T5, KERPLE,
    FIRE), whose curves run over the query-key distance."""
    from conformance.core import registry

    try:
        return str(registry.get(report.protocol).curve_axis)
    except Exception:  # noqa: BLE001 - a report of a protocol this posref does not know
        return "position"


def render(report) -> bytes:
    """PNG bytes of the plot."""
    return _png(figure(report))


def figure(report):
    """The matplotlib Figure (on an Agg canvas) that ``render`` saves."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    from conformance.isolation import printable

    data = series(report)
    axis = _axis(report)
    # Every text is drawn with parse_math=False: a target named "a$^$b.py" made matplotlib parse
    # mathtext and fail after grading (issue 24); printable: no control characters either.
    title = printable(f"posref {report.suite_version} · {report.protocol} · {report.target}")
    sub = (f"profile {report.profile} · vectors {short_digest(report.vectors_digest)} · "
           f"device {(report.environment or {}).get('device', '?')}")

    if not data:
        fig = Figure(figsize=(10, 3), dpi=110)
        FigureCanvasAgg(fig)
        fig.text(0.5, 0.62, f"no per-{axis} data to plot", ha="center", va="center",
                 fontsize=15, color="#555555")
        fig.text(0.5, 0.40, summary_line(report), ha="center", va="center", fontsize=8,
                 wrap=True, parse_math=False)
        fig.suptitle(title, fontsize=10, parse_math=False)
        return fig

    fig = Figure(figsize=(10, 7.5), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    ax_err, ax_ratio = fig.subplots(2, 1, sharex=True, height_ratios=[3, 2])
    notes = []
    proxies = []
    all_pos = [p for s in data.values() for p in s["pos"]]
    for i, dtype in enumerate(_dtype_order(report, data)):
        s = data[dtype]
        colour = DTYPE_COLOURS.get(dtype, _OTHER_COLOURS[i % len(_OTHER_COLOURS)])
        marker = DTYPE_MARKERS.get(dtype, _OTHER_MARKERS[i % len(_OTHER_MARKERS)])
        z = DTYPE_ZORDER.get(dtype, 2)
        zero, bad = _draw_series(ax_err, s["pos"], s["err"], colour, f"{dtype} error", f"{marker}-", z)
        _draw_series(ax_err, s["pos"], s["budget"], colour, None, "_--", z)
        _, bad_ratio = _draw_series(ax_ratio, s["pos"], s["ratio"], colour, dtype, f"{marker}-", z)
        over = [(x, y) for x, y in zip(s["pos"], s["ratio"]) if y is not None and math.isfinite(y) and y > 1.0]
        if over:
            ax_ratio.plot([x for x, _ in over], [y for _, y in over], "o", markersize=10, markerfacecolor="none",
                          markeredgecolor="red", markeredgewidth=1.5)
        for ax, xs in ((ax_err, bad), (ax_ratio, bad_ratio)):
            if xs:
                # along the top edge: x in data coordinates, y in axes coordinates
                ax.plot(xs, [0.97] * len(xs), "x", color=colour, markersize=8, clip_on=False,
                        transform=ax.get_xaxis_transform())
        if not any(y is not None and math.isfinite(y) and y > 0 for y in s["err"]):
            proxies.append((Line2D([], [], color=colour, marker="x", linestyle="none"),
                            f"{dtype}: no finite error"))
        if zero:
            notes.append(f"{dtype}: {zero} {axis}(s) with zero error not drawn")
        if bad:
            notes.append(f"{dtype}: {len(bad)} {axis}(s) with non-finite error (x on top edge)")

    finite_ratios = [r for d in data.values() for r in d["ratio"] if math.isfinite(r) and r > 0]
    if finite_ratios:  # keep the pass line well inside the panel, whatever the ratios are
        ax_ratio.set_ylim(min(min(finite_ratios) / 2, 0.5), max(max(finite_ratios) * 3, 3.0))
    ax_ratio.axhline(1.0, color="black", linewidth=1, linestyle=":")
    ax_ratio.text(0.005, 1.0, " pass line (ratio 1; red rings: over budget)",
                  transform=ax_ratio.get_yaxis_transform(), va="bottom", fontsize=8)
    for ax in (ax_err, ax_ratio):
        if ax.lines and any(l.get_ydata().size for l in ax.lines):
            ax.set_yscale("log")
        ax.grid(True, which="major", alpha=0.3)
    if min(all_pos) >= 0:
        ax_ratio.set_xscale("symlog", linthresh=1.0, base=2)
    else:
        ax_ratio.set_xscale("symlog", linthresh=1.0)
    lo, hi = min(all_pos), max(all_pos)
    ax_ratio.set_xlim(left=lo - max(abs(lo) * 0.5, 0.5) if lo <= 0 else lo,
                      right=hi + max(abs(hi) * 0.5, 1.0))
    ax_err.set_ylabel(f"max |error| per {axis}")
    ax_ratio.set_ylabel("budget ratio (error / budget)")
    ax_ratio.set_xlabel(("position m" if axis == "position" else "query-key distance |i - j|")
                        + " (symmetric log scale)")
    handles, labels = ax_err.get_legend_handles_labels()
    for handle, label in proxies:
        handles.append(handle)
        labels.append(label)
    handles.append(Line2D([], [], color="grey", linestyle="--"))
    labels.append("budget (dashed, same colour)")
    ax_err.legend(handles, labels, fontsize=8, loc="upper left")
    handles, labels = ax_ratio.get_legend_handles_labels()
    for handle, label in proxies:
        handles.append(handle)
        labels.append(label)
    ax_ratio.legend(handles, labels, fontsize=8, loc="best")
    ax_err.set_title(sub, fontsize=9, parse_math=False)
    fig.suptitle(title, fontsize=11, parse_math=False)
    footer = summary_line(report) + ("\n" + "; ".join(notes) if notes else "")
    fig.supxlabel(footer, fontsize=7, color="#444444", parse_math=False)
    return fig


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def write(report, path) -> None:
    write_text_atomic(path, render(report))
