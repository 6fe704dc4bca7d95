"""RoPE's probe: which pair layout an implementation applies, and which cases to grade.

RoPE pairs elements either as (j, j + r/2) ("half": GPT-NeoX, HF Llama rotate_half) or as
(2i, 2i+1) ("interleaved": GPT-J rotate_every_two, Meta complex). An implementation may follow
``spec.layout`` or be fixed to one layout whatever the spec says, and it may support only part of
the catalog (full rotary only, as most Llama-style code does). For each layout the probe calls the
adapter on a small float input (positions 1..13, two heads) with a spec the implementation
accepts: it tries the catalog's configurations in order (full rotary first, then the rest) and
takes ``Unsupported`` as "try another configuration", never as "undetermined". It grades the
output against the reference in *both* layouts and records which one it matches (within the
standard budget; or clearly closer, by a factor of 4, when it matches neither, as a buggy
implementation does).

detected layout (the report's ``probe.detected_layout``):
    "both"         follows spec.layout (half cases and interleaved cases are graded)
    "half"         fixed to half (interleaved cases are skipped with a reason)
    "interleaved"  fixed to interleaved (half cases are skipped)
    "swapped"      applies the opposite of spec.layout (everything graded; failures name it)
    None           undetermined (the probe says why): everything graded
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Optional

import numpy as np

from conformance.core.protocol import Probe
from conformance.results import Diagnosis

LAYOUTS = ("half", "interleaved")
PROBE_POSITIONS = (1, 2, 3, 5, 8, 13)
_CLEARLY_CLOSER = 4.0
# At most this many configurations are tried per layout before giving up on it.
MAX_ATTEMPTS = 6


def other(layout: str) -> str:
    return "interleaved" if layout == "half" else "half"


def probe_arrays(head_dim: int, seed: int = 20240521):
    """A small input: x float64 [1, 6, 2, head_dim] ~ N(0, 1), positions int64 [1, 6]."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, len(PROBE_POSITIONS), 2, head_dim))
    return x, np.array([PROBE_POSITIONS], dtype=np.int64)


def _plain(spec):
    """The spec in the default tensor layout, out of place (the probe's own calls)."""
    if not hasattr(spec, "tensor_layout"):
        return spec
    return replace(spec, tensor_layout="bshd", cu_seqlens=None, inplace=False)


def candidates(specs) -> list:
    """Distinct configurations (layout ignored), full rotary first, in catalog order otherwise."""
    seen, out = set(), []
    for spec in sorted((_plain(s) for s in specs), key=lambda s: s.rotary_dim != s.head_dim):
        key = (spec.head_dim, spec.rotary_dim, spec.base, repr(spec.scaling))
        if key not in seen:
            seen.add(key)
            out.append(spec)
    return out


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


@dataclass
class LayoutProbe(Probe):
    """What the probe found (see the module docstring) and the grading plan that follows."""

    declared: str = "auto"
    follows: dict = field(default_factory=dict)  # spec layout -> matched layout or None
    ratios: dict = field(default_factory=dict)  # spec layout -> {layout: standard ratio} or error
    detected: Optional[str] = None
    reason: str = ""  # why detection could not decide (empty when it did)
    skip: dict = field(default_factory=dict)  # case layout -> reason its cases are not graded
    # tensor layout (spec.tensor_layout) -> why its cases are not graded: the adapter raised
    # Unsupported for it (conformance.rope.spec); absent: graded.
    tensor_skip: dict = field(default_factory=dict)
    swapped: dict = field(default_factory=dict)  # case layout -> Diagnosis for its failures

    @property
    def blackbox_options(self) -> dict:
        if self.declared != "auto":
            return {"layout": self.declared}
        return {"layout": self.detected if self.detected in LAYOUTS else "half"}

    def to_json(self) -> dict:
        out = {"detected_layout": self.detected, "declared_layout": self.declared,
               "follows": dict(self.follows), "reason": self.reason or None}
        if self.tensor_skip:
            out["unsupported_tensor_layouts"] = sorted(self.tensor_skip)
        return out

    def describe(self) -> str:
        text = f"detected layout: {self.detected or '-'}"
        if self.reason:
            text += f" ({self.reason})"
        if self.tensor_skip:
            text += f"; tensor layouts not supported: {', '.join(sorted(self.tensor_skip))}"
        return text

    def skip_reason(self, spec) -> Optional[str]:
        return self.skip.get(spec.layout) or self.tensor_skip.get(getattr(spec, "tensor_layout", "bshd"))

    def diagnosis(self, spec):
        return self.swapped.get(spec.layout)


def _try_layout(invoker, protocol, configs, layout, dtype, device):
    """(ratios or error text) for the first configuration of ``layout`` the adapter accepts."""
    unsupported = None
    for spec in configs[:MAX_ATTEMPTS]:
        spec = replace(spec, layout=layout)
        x, pos = probe_arrays(spec.head_dim)
        prepared = protocol.prepare_arrays(x, pos, copy.deepcopy(spec), dtype, device)
        outcome = invoker.call(*prepared.args)
        if outcome.kind == "unsupported":
            unsupported = outcome.error or "Unsupported"
            continue
        if not outcome.ok:
            return f"{outcome.kind}: {outcome.error}"
        ratios = {}
        for candidate in LAYOUTS:
            try:
                graded = protocol.grade(None, replace(spec, layout=candidate), prepared, outcome.value)
            except Exception:  # noqa: BLE001 - an ungradable probe output decides nothing
                ratios[candidate] = None
                continue
            ratios[candidate] = graded.ratio.get("standard") if graded.gradable else None
        return ratios
    return f"unsupported: {unsupported}"


def _why_undecided(probe: LayoutProbe) -> str:
    parts = []
    for layout in LAYOUTS:
        r = probe.ratios.get(layout)
        if isinstance(r, str):
            parts.append(f"spec.layout={layout}: {r}")
        elif isinstance(r, dict):
            shown = ", ".join(f"{k} {v:.3g}" if v is not None else f"{k} unreadable" for k, v in r.items())
            parts.append(f"spec.layout={layout}: matches neither layout (budget ratio {shown})")
    return "; ".join(parts) or "no probe ran"


def detect(invoker, protocol, specs, options) -> LayoutProbe:
    """Probe the implementation and plan the grading (options: the runner's Options)."""
    probe = LayoutProbe(declared=options.layout)
    configs = candidates(specs)
    for layout in LAYOUTS:
        found = _try_layout(invoker, protocol, configs, layout, options.dtypes[0], options.device)
        probe.ratios[layout] = found
        probe.follows[layout] = _match(found) if isinstance(found, dict) else None
    _probe_tensor_layouts(invoker, protocol, specs, configs, probe, options)
    f = probe.follows
    seen = {v for v in f.values() if v is not None}
    if f.get("half") == "half" and f.get("interleaved") == "interleaved":
        probe.detected = "both"
    elif f.get("half") == "interleaved" and f.get("interleaved") == "half":
        probe.detected = "swapped"
    elif len(seen) == 1:
        probe.detected = seen.pop()
    else:
        probe.reason = _why_undecided(probe)
    _plan(probe)
    return probe


def _probe_tensor_layouts(invoker, protocol, specs, configs, probe, options) -> None:
    """For each tensor layout other than bshd that some case uses: one call on the probe input in
    that layout (the first configuration, in whichever pair layout it matched). Unsupported means
    its cases are skipped with the adapter's reason; any other outcome: they are graded (and an
    error shows in them)."""
    wanted = sorted({getattr(s, "tensor_layout", "bshd") for s in specs} - {"bshd"})
    if not wanted or not configs:
        return
    layout = next((k for k, v in probe.follows.items() if v is not None), "half")
    for tensor_layout in wanted:
        spec = replace(configs[0], layout=layout, tensor_layout=tensor_layout,
                       cu_seqlens=(0, len(PROBE_POSITIONS)) if tensor_layout == "thd" else None)
        x, pos = probe_arrays(spec.head_dim)
        prepared = protocol.prepare_arrays(x, pos, copy.deepcopy(spec), options.dtypes[0], options.device)
        outcome = invoker.call(*prepared.args)
        if outcome.kind == "unsupported":
            why = str(outcome.error or "Unsupported")
            why = why.split(": ", 1)[1] if why.startswith("Unsupported: ") else why
            probe.tensor_skip[tensor_layout] = (f"the implementation does not support tensor layout "
                                                f"{tensor_layout!r} ({why}); its cases are skipped")


def _plan(probe: LayoutProbe) -> None:
    """Fill in which case layouts are skipped and where layout-swapped applies."""
    declared, follows = probe.declared, probe.follows
    if declared != "auto":
        probe.skip = {other(declared): f"--layout {declared} was declared: {other(declared)}-layout cases "
                                       "are not graded"}
        if follows.get(declared) == other(declared):
            probe.swapped[declared] = Diagnosis(
                "layout-swapped",
                f"declared layout {declared!r}, but the implementation pairs elements in the "
                f"{other(declared)} layout ({_pairs(other(declared))})",
            )
        return
    detected = probe.detected
    if detected in LAYOUTS:
        tried = probe.ratios.get(other(detected))
        if isinstance(tried, str) and tried.startswith("unsupported"):
            probe.skip[other(detected)] = (
                f"the implementation does not support the {other(detected)} layout "
                f"({tried.partition(': ')[2] or 'Unsupported'}); {other(detected)}-layout cases are skipped"
            )
        else:
            probe.skip[other(detected)] = (
                f"the implementation is fixed to the {detected} layout (detected); "
                f"{other(detected)}-layout cases are skipped"
            )
    elif detected == "swapped":
        for layout in LAYOUTS:
            probe.swapped[layout] = Diagnosis(
                "layout-swapped",
                f"spec.layout is {layout!r}, but the implementation pairs elements in the "
                f"{other(layout)} layout ({_pairs(other(layout))})",
            )


def _pairs(layout: str) -> str:
    return "pairs (j, j + r/2)" if layout == "half" else "pairs (2i, 2i+1)"
