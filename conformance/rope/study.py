"""Long-context precision study of a rope.apply implementation: its error against position.

For each configuration (Llama 3 at base 5e5 without scaling, and with Llama 3.1's scaling) and
each dtype, the implementation rotates one row of seeded inputs at about 90 positions from 0 to
``max_position`` (2^(k/4) for every k, and each power of two and its neighbours). Per position:

- error: ||f(x, m) - R_m x|| over the token's heads and features, R_m x the float64 reference
  applied to the dtype-rounded input (so the error is the implementation's own);
- step: ||R_(m+1) x - R_m x||, how far the true output moves from m to m + 1.

A position is *unusable* in a dtype once error >= step / 2: there the output is closer to (or as
close to) the rotation of a neighbouring position as to its own, so attention can no longer tell
m from m + 1. ``first_unusable`` is the smallest such position (None: none up to max_position).

``run_study`` returns the numbers; ``render`` draws one PNG per configuration (error / ||x|| per
dtype and step / 2 / ||x|| against position, log axes). ``posref study`` is the command.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field, replace
from typing import Optional

import numpy as np

from conformance.rope.spec import RopeSpec
from conformance.core import rotation_reference as reference
from conformance.core.registry import get
from conformance.reports.plot import DTYPE_COLOURS
from reference.golden.inputs import representable_inputs

LLAMA31 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
           "original_max_position_embeddings": 8192}
CONFIGS = {
    "default": ("Llama 3 (head 128, base 5e5), no scaling", RopeSpec(128, 128, 5e5, "half", None)),
    "llama3.1": ("Llama 3.1 scaling (factor 8, original 8192) at base 5e5", RopeSpec(128, 128, 5e5, "half", LLAMA31)),
}
DTYPES = ("float32", "bfloat16", "float16")
HEADS = 2


def study_positions(max_position: int) -> np.ndarray:
    """0, 2^(k/4) rounded for k = 0.. and each power of two with its neighbours, up to max_position."""
    found = {0}
    k = 0
    while 2 ** (k / 4) <= max_position:
        found.add(int(round(2 ** (k / 4))))
        k += 1
    p = 1
    while p <= max_position:
        found.update(v for v in (p - 1, p, p + 1) if 0 <= v <= max_position)
        p *= 2
    return np.array(sorted(found), dtype=np.int64)


@dataclass
class Series:
    """One configuration in one dtype."""

    config: str
    dtype: str
    positions: list
    error: list = field(default_factory=list)  # per position, None where the call failed
    step: list = field(default_factory=list)
    norm: list = field(default_factory=list)
    first_unusable: Optional[int] = None
    message: str = ""  # why there is no error curve (Unsupported, raised, ...)


def _token_norm(a: np.ndarray) -> np.ndarray:
    return np.sqrt(np.sum(a.reshape(a.shape[0], a.shape[1], -1) ** 2, axis=-1))[0]


def run_study(invoker, *, layout: str = "half", dtypes=DTYPES, configs=tuple(CONFIGS),
              max_position: int = 2**20, device: str = "cpu") -> list:
    """[Series] for every configuration and dtype (see the module docstring)."""
    import torch

    proto = get("rope.apply")
    pos = study_positions(max_position)[None, :]
    out = []
    for name in configs:
        spec = replace(CONFIGS[name][1], layout=layout, seq_len=int(max_position) + 1)
        # the same inputs for every configuration, so their curves compare point by point
        x = representable_inputs("study", (1, pos.shape[1], HEADS, spec.head_dim))
        for dtype in dtypes:
            series = Series(name, dtype, pos[0].tolist())
            prepared = proto.prepare_arrays(x, pos, spec, dtype, device)
            xr = prepared.inputs_f64["x"]
            ref = reference.apply(xr, pos, spec, layout)
            series.step = _token_norm(reference.apply(xr, pos + 1, spec, layout) - ref).tolist()
            series.norm = _token_norm(xr).tolist()
            outcome = invoker.call(*prepared.args)
            if outcome.kind != "ok":
                series.message = f"{outcome.kind}: {outcome.error}"
            else:
                try:
                    got = outcome.value.detach().to("cpu", torch.float64).numpy()
                    if got.shape != ref.shape:
                        raise ValueError(f"shape {tuple(got.shape)}, expected {ref.shape}")
                except Exception as exc:  # noqa: BLE001 - a study of broken code says so and goes on
                    series.message = f"unreadable output: {exc}"
                else:
                    err = _token_norm(np.where(np.isfinite(got), got - ref, np.inf))
                    series.error = err.tolist()
                    bad = [int(m) for m, e, s in zip(pos[0], err, series.step) if not e < s / 2]
                    series.first_unusable = min(bad) if bad else None
            out.append(series)
    return out


def render(series_list: list, config: str, target: str) -> bytes:
    """PNG bytes: error / ||x|| per dtype and step / 2 / ||x|| against position, for one config."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 6), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    drawn = [s for s in series_list if s.config == config]
    for s in drawn:
        colour = DTYPE_COLOURS.get(s.dtype, "#2ca02c")
        pts = [(m, e / n) for m, e, n in zip(s.positions, s.error, s.norm) if m > 0 and e is not None and n > 0]
        label = s.dtype + (f" (unusable from {s.first_unusable})" if s.first_unusable is not None else
                           " (usable throughout)")
        if pts:
            ax.plot([p for p, _ in pts], [max(v, 1e-18) for _, v in pts], "o-", color=colour,
                    markersize=3, linewidth=1.2, label=label)
            if s.first_unusable:
                ax.axvline(s.first_unusable, color=colour, linestyle=":", linewidth=1)
        else:
            ax.plot([], [], color=colour, label=f"{s.dtype}: {s.message[:60]}")
    if drawn:
        s = drawn[0]
        half = [(m, st / 2 / n) for m, st, n in zip(s.positions, s.step, s.norm) if m > 0 and n > 0]
        ax.plot([p for p, _ in half], [v for _, v in half], "k--", linewidth=1.2,
                label="step / 2: half the distance from R_m x to R_(m+1) x")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.grid(True, which="major", alpha=0.3)
    ax.set_xlabel("position m")
    ax.set_ylabel("||error|| / ||x|| per token")
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(f"{CONFIGS[config][0]}\n{target}", fontsize=10)
    fig.suptitle("posref study: error against position (unusable where the error reaches step / 2)", fontsize=11)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def summary_table(series_list: list) -> list:
    """Markdown lines: configuration, dtype, first unusable position, worst error / ||x||."""
    lines = ["| configuration | dtype | first unusable position | largest error / norm |",
             "|---|---|---:|---:|"]
    for s in series_list:
        worst = max((e / n for e, n in zip(s.error, s.norm) if n > 0 and e is not None and math.isfinite(e)),
                    default=None)
        first = s.message or ("none up to " + str(max(s.positions)) if s.first_unusable is None
                              else str(s.first_unusable))
        lines.append(f"| {s.config} | {s.dtype} | {first} | {'-' if worst is None else f'{worst:.3g}'} |")
    return lines


__all__ = ["CONFIGS", "Series", "render", "run_study", "study_positions", "summary_table"]
