"""Pair-layout detection: which layout an implementation applies, and which cases to grade.

RoPE pairs elements either as (j, j + r/2) ("half": GPT-NeoX, HF Llama rotate_half) or as
(2i, 2i+1) ("interleaved": GPT-J rotate_every_two, Meta complex). An implementation may follow
``spec.layout`` or be fixed to one layout whatever the spec says. The probe calls the adapter on
a small float input (positions 1..13, two heads) once with spec.layout = "half" and once with
"interleaved", grades each output against the reference in *both* layouts and records which one
it matches (within the standard budget; or clearly closer, by a factor of 4, when it matches
neither, as a buggy implementation does).

detected layout (reported as ``detected_layout``):
    "both"         follows spec.layout (half cases and interleaved cases are graded)
    "half"         fixed to half (interleaved cases are skipped with a reason)
    "interleaved"  fixed to interleaved (half cases are skipped)
    "swapped"      applies the opposite of spec.layout (everything graded; failures name it)
    None           undetermined (every probe failed or matched neither): everything graded
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Optional

import numpy as np

from conformance.results import Diagnosis

LAYOUTS = ("half", "interleaved")
PROBE_POSITIONS = (1, 2, 3, 5, 8, 13)
_CLEARLY_CLOSER = 4.0


def other(layout: str) -> str:
    return "interleaved" if layout == "half" else "half"


@dataclass
class Detection:
    follows: dict = field(default_factory=dict)  # spec layout -> matched layout or None
    ratios: dict = field(default_factory=dict)  # spec layout -> {layout: standard ratio} or error
    detected: Optional[str] = None


def probe_arrays(head_dim: int, seed: int = 20240521):
    """A small input: x float64 [1, 6, 2, head_dim] ~ N(0, 1), positions int64 [1, 6]."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, len(PROBE_POSITIONS), 2, head_dim))
    return x, np.array([PROBE_POSITIONS], dtype=np.int64)


def _match(ratios: dict) -> Optional[str]:
    got = {k: v for k, v in ratios.items() if v is not None}
    if not got:
        return None
    best = min(got, key=got.get)
    if got[best] <= 1.0:
        return best
    rest = [v for k, v in got.items() if k != best]
    if rest and rest[0] > _CLEARLY_CLOSER * got[best]:
        return best
    return None


def detect(invoker, protocol, templates: dict, dtype: str, device: str) -> Detection:
    """Probe the implementation; templates maps a spec layout to a RopeSpec to start from."""
    det = Detection()
    for layout in LAYOUTS:
        spec = replace(templates[layout], layout=layout)
        x, pos = probe_arrays(spec.head_dim)
        prepared = protocol.prepare_arrays(x, pos, copy.deepcopy(spec), dtype, device)
        outcome = invoker.call(*prepared.args)
        if not outcome.ok:
            det.follows[layout] = None
            det.ratios[layout] = f"{outcome.kind}: {outcome.error}"
            continue
        ratios = {}
        for candidate in LAYOUTS:
            try:
                graded = protocol.grade(None, replace(spec, layout=candidate), prepared, outcome.value)
            except Exception:  # noqa: BLE001 - an ungradable probe output decides nothing
                ratios[candidate] = None
                continue
            ratios[candidate] = graded.ratio.get("standard") if graded.gradable else None
        det.ratios[layout] = ratios
        det.follows[layout] = _match(ratios)
    f = det.follows
    seen = {v for v in f.values() if v is not None}
    if f.get("half") == "half" and f.get("interleaved") == "interleaved":
        det.detected = "both"
    elif f.get("half") == "interleaved" and f.get("interleaved") == "half":
        det.detected = "swapped"
    elif len(seen) == 1:
        det.detected = seen.pop()
    return det


@dataclass
class Plan:
    """Which case layouts are graded, why the others are skipped, where layout-swapped applies."""

    graded: tuple
    skip_reason: dict  # case layout -> reason
    swapped: dict  # case layout -> Diagnosis added to that layout's failing cases


def plan(detection: Optional[Detection], declared: str) -> Plan:
    """The grading plan for --layout auto (declared == "auto") or a declared layout."""
    follows = detection.follows if detection else {}
    if declared != "auto":
        skip = {other(declared): f"--layout {declared} was declared: {other(declared)}-layout cases are not graded"}
        swapped = {}
        if follows.get(declared) == other(declared):
            swapped[declared] = Diagnosis(
                "layout-swapped",
                f"declared layout {declared!r}, but the implementation pairs elements in the "
                f"{other(declared)} layout ({_pairs(other(declared))})",
            )
        return Plan((declared,), skip, swapped)
    detected = detection.detected if detection else None
    if detected in LAYOUTS:
        probe = detection.ratios.get(other(detected))
        if isinstance(probe, str) and probe.startswith("unsupported"):
            reason = (
                f"the implementation does not support the {other(detected)} layout "
                f"({probe.partition(': ')[2] or 'Unsupported'}); {other(detected)}-layout cases are skipped"
            )
        else:
            reason = (
                f"the implementation is fixed to the {detected} layout (detected); "
                f"{other(detected)}-layout cases are skipped"
            )
        return Plan((detected,), {other(detected): reason}, {})
    swapped = {}
    if detected == "swapped":
        for layout in LAYOUTS:
            swapped[layout] = Diagnosis(
                "layout-swapped",
                f"spec.layout is {layout!r}, but the implementation pairs elements in the "
                f"{other(layout)} layout ({_pairs(other(layout))})",
            )
    return Plan(LAYOUTS, {}, swapped)


def _pairs(layout: str) -> str:
    return "pairs (j, j + r/2)" if layout == "half" else "pairs (2i, 2i+1)"
