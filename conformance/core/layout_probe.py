"""The pair-layout probe of the rotary protocols (rope.apply, rope.apply_qk, gaussian_rope.apply):
which pair layout an implementation applies, to report and explain.

RoPE pairs elements either as (j, j + r/2) ("half": GPT-NeoX, HF Llama rotate_half) or as
(2i, 2i+1) ("interleaved": GPT-J rotate_every_two, Meta complex). An implementation may follow
``spec.layout`` or be fixed to one layout whatever the spec says, and it may support only part of
the catalog (full rotary only, as most Llama-style code does). For each layout the probe calls the
adapter on a small float input (positions 0..5, one prefill from the start, as code that builds
its own position ids assumes; two heads) with a spec the implementation accepts: it tries the
catalog's configurations in order (full rotary first, then the rest) and takes ``Unsupported`` as
"try another configuration", never as "undetermined". It grades the output against the reference
in *both* layouts and records which one it matches (within the standard budget; or clearly
closer, by a factor of 4, when it matches neither, as a buggy implementation does).

The probe decides nothing (docs/design.md, "Skips"): every case is graded under its own spec, an
interleaved case of an implementation fixed to the half layout fails (its diagnosis names
``layout-swapped`` from the case's own output), and a case is skipped only when the adapter
raises Unsupported for it or when ``--layout`` leaves it out (Protocol.excluded). What the probe
found is the report's ``probe`` object, the layout of the black-box checks, and a note on failing
cases (``explain``).

detected layout (the report's ``probe.detected_layout``):
    "both"         follows spec.layout
    "half"         pairs (j, j + r/2) whatever spec.layout says (or supports only that layout)
    "interleaved"  pairs (2i, 2i+1) whatever spec.layout says (or supports only that layout)
    "swapped"      applies the opposite of spec.layout
    None           undetermined (the probe says why)
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Optional

import numpy as np

from conformance.core.protocol import Probe

LAYOUTS = ("half", "interleaved")
PROBE_POSITIONS = (0, 1, 2, 3, 4, 5)
_CLEARLY_CLOSER = 4.0
# At most this many configurations are tried per layout before giving up on it: enough to reach
# the one scaling type an implementation like torchtune's Llama3ScaledRoPE supports (a refusal is
# one cheap call).
MAX_ATTEMPTS = 32


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
    """What the probe found (see the module docstring)."""

    declared: str = "auto"
    follows: dict = field(default_factory=dict)  # spec layout -> matched layout or None
    ratios: dict = field(default_factory=dict)  # spec layout -> {layout: standard ratio} or error
    detected: Optional[str] = None
    reason: str = ""  # why detection could not decide (empty when it did)

    @property
    def blackbox_options(self) -> dict:
        if self.declared != "auto":
            return {"layout": self.declared}
        return {"layout": self.detected if self.detected in LAYOUTS else "half"}

    def to_json(self) -> dict:
        return {"detected_layout": self.detected, "declared_layout": self.declared,
                "follows": dict(self.follows), "reason": self.reason or None}

    def describe(self) -> str:
        text = f"detected layout: {self.detected or '-'}"
        if self.reason:
            text += f" ({self.reason})"
        return text

    def explain(self, spec) -> Optional[str]:
        """A note for a failing case: what the probe saw of the layout this case asks for. The
        case itself was graded under its own spec."""
        layout = getattr(spec, "layout", None)
        if layout not in LAYOUTS:
            return None
        seen = self.follows.get(layout)
        if self.detected is None:
            return (f"graded in its own layout ({layout}); the layout probe could not tell which pairs "
                    f"the implementation rotates: {self.reason or 'no probe ran'}")
        if seen == other(layout):
            return (f"the layout probe found that, given spec.layout={layout!r}, the implementation "
                    f"pairs elements in the {other(layout)} layout ({_pairs(other(layout))})")
        tried = self.ratios.get(layout)
        if isinstance(tried, str) and tried.startswith("unsupported"):
            return (f"the implementation refused spec.layout={layout!r} on the probe input "
                    f"({tried.partition(': ')[2] or 'Unsupported'}) but not this case, which was graded")
        return None


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
    """Probe the implementation's pair layout (options: the runner's Options)."""
    probe = LayoutProbe(declared=options.layout)
    configs = candidates(specs)
    for layout in LAYOUTS:
        found = _try_layout(invoker, protocol, configs, layout, options.dtypes[0], options.device)
        probe.ratios[layout] = found
        probe.follows[layout] = _match(found) if isinstance(found, dict) else None
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
    return probe


def _pairs(layout: str) -> str:
    return "pairs (j, j + r/2)" if layout == "half" else "pairs (2i, 2i+1)"
