"""The runner's result model: what every report (terminal, JSON, JUnit, Markdown, plot) reads.

Field names follow the JSON report contract in docs/design.md; ``Report.to_json()`` is that
document.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Optional

VERDICTS = ("pass", "fail", "error", "skip", "acceptable")


@dataclass
class Diagnosis:
    """One explanation of a failure: a stable code (conformance.core.codes or a family's
    ``Family.codes``) and a one-line message."""

    code: str
    message: str


@dataclass
class CaseResult:
    """One golden case graded in one dtype.

    verdict        pass | fail | error | skip | acceptable
    max_abs_error  largest |output - expected| over elements (None when no output was graded)
    budget_ratio   max(error / budget) over elements; the case passes when <= 1
    worst_index    index (as a list) of the element that attains budget_ratio
    worst_location that element in words (batch row, position, head, pair...)
    mismatch       {"count", "total", "unit"}: how many output values (or pairs) are over budget
    first_failing_position  the lowest position with a value over budget (None if none)
    curve          [position, max error, max budget] per position the case holds (for plots)
    """

    id: str
    dtype: str
    verdict: str
    max_abs_error: Optional[float] = None
    budget_ratio: Optional[float] = None
    worst_index: Optional[list] = None
    diagnoses: list = field(default_factory=list)  # list[Diagnosis]
    repro: str = ""
    duration_s: float = 0.0
    # Per-position curve for the plot: list of [position, max_error, max_budget].
    curve: list = field(default_factory=list)
    notes: list = field(default_factory=list)  # list[str], e.g. "budget too wide to tell m from m+1"
    worst_location: str = ""
    mismatch: Optional[dict] = None
    first_failing_position: Optional[int] = None
    expected_failure: bool = False  # failing, and listed in the --expected-failures baseline
    # The dtype the output arrived in (under --autocast it may be the autocast dtype).
    output_dtype: Optional[str] = None
    # --grad: {"verdict", "budget_ratio", "inputs": {role: {"verdict", "budget_ratio",
    # "max_abs_error", "worst_index", "worst_location", "mismatch", "dtype"}}}; None without --grad.
    grad: Optional[dict] = None
    # Where the adapter raised, in the user's own code: {"file", "line", "frames": [str]} (posref's
    # frames left out, at most a few; isolation.user_traceback); None when it did not raise.
    traceback: Optional[dict] = None
    # --compile: True for the result of the adapter wrapped by torch.compile (conformance.compiled);
    # the eager result of the same case and dtype has False.
    compiled: bool = False

    def to_json(self) -> dict:
        return asdict(self)  # recurses into the Diagnosis entries

    def traceback_lines(self) -> list:
        """["raised at FILE:LINE", "  File ..., line N, in name: code", ...] (every report prints
        these the same way); [] when the adapter did not raise or no frame of the user's was found."""
        tb = self.traceback
        if not isinstance(tb, dict) or not tb.get("file"):
            return []
        return [f"raised at {tb['file']}:{tb.get('line')}"] + [f"  {f}" for f in tb.get("frames") or []]

    @classmethod
    def from_json(cls, data: dict) -> "CaseResult":
        """The inverse of to_json (unknown keys ignored)."""
        return cls(**_known(cls, data))


@dataclass
class IdentityResult:
    """A black-box identity check run on the implementation itself."""

    id: str
    dtype: str
    verdict: str  # pass | fail | error | skip
    residual: Optional[float] = None
    bound: Optional[float] = None
    message: str = ""
    diagnoses: list = field(default_factory=list)

    def to_json(self) -> dict:
        return asdict(self)  # recurses into the Diagnosis entries

    @classmethod
    def from_json(cls, data: dict) -> "IdentityResult":
        """The inverse of to_json (unknown keys ignored)."""
        return cls(**_known(cls, data))


def _known(cls, data: dict) -> dict:
    """data's keys that are fields of the dataclass cls, with diagnoses as Diagnosis entries."""
    names = {f.name for f in fields(cls)}
    kept = {k: v for k, v in data.items() if k in names}
    if "diagnoses" in kept:
        kept["diagnoses"] = [Diagnosis(**d) for d in kept["diagnoses"] or []]
    return kept


@dataclass
class Report:
    suite_version: str
    vectors_digest: str
    protocol: str
    target: str
    environment: dict
    profile: str
    # What the protocol's probe found (RoPE: {"summary", "detected_layout", ...}); None without one.
    probe: Optional[dict] = None
    # Where the adapter is defined, {"file", "line"} (JUnit annotations); None when unknown.
    source: Optional[dict] = None
    cases: list = field(default_factory=list)  # list[CaseResult]
    identities: list = field(default_factory=list)  # list[IdentityResult]
    notes: list = field(default_factory=list)  # list[str]: about the run itself (threads left running)
    seed: Optional[int] = None  # of the fresh cases drawn at run time (None: none were drawn)
    baseline: Optional[dict] = None  # what --expected-failures found (conformance.baseline.apply)
    training: Optional[dict] = None  # {"grad": bool, "autocast": dtype or None} under --grad / --autocast
    model: Optional[dict] = None  # the model graded at (conformance.model): {"name", "source"} or {"name", "config", "sha256"}
    compile: Optional[dict] = None  # --compile: {"backend", "ran": bool, "reason": why not, or None}
    # --triton-interpret: {"triton": version, "interpreted": [kernels], "compiled": [kernels], "isolated"}
    triton_interpret: Optional[dict] = None

    def summary(self) -> dict:
        """Counts per verdict; a failure the baseline expects counts as ``xfail``, not as fail or
        error, and ``fixed`` counts baseline cases that pass now."""
        counts = {v: 0 for v in VERDICTS}
        counts["xfail"] = 0
        for c in self.cases:
            key = "xfail" if c.expected_failure and c.verdict in ("fail", "error") else c.verdict
            counts[key] = counts.get(key, 0) + 1
        counts["fixed"] = len((self.baseline or {}).get("fixed", []))
        id_fail = sum(1 for i in self.identities if i.verdict in ("fail", "error"))
        counts["identity_failures"] = id_fail
        counts["identity_xfail"] = sum(1 for i in self.identities if i.verdict == "xfail")
        counts["identity_passed"] = sum(1 for i in self.identities if i.verdict == "pass")
        counts["identity_skipped"] = sum(1 for i in self.identities if i.verdict == "skip")
        bad = counts["fail"] + counts["error"] + id_fail
        graded = sum(counts[v] for v in ("pass", "acceptable", "fail", "error", "xfail"))
        counts["overall"] = "fail" if bad else ("pass" if graded else "skip")
        return counts

    def to_json(self) -> dict[str, Any]:
        doc = {
            "suite_version": self.suite_version,
            "vectors_digest": self.vectors_digest,
            "protocol": self.protocol,
            "target": self.target,
            "source": self.source,
            "environment": self.environment,
            "profile": self.profile,
            "summary": self.summary(),
            "probe": self.probe,
            "cases": [c.to_json() for c in self.cases],
            "identities": [i.to_json() for i in self.identities],
            "notes": list(self.notes),
            "seed": self.seed,
            "baseline": self.baseline,
            "training": self.training,
            "model": self.model,
        }
        if self.compile is not None:  # only under --compile: documents of other runs keep their keys
            doc["compile"] = self.compile
        if self.triton_interpret is not None:  # only under --triton-interpret, likewise
            doc["triton_interpret"] = self.triton_interpret
        return doc

    @classmethod
    def from_json(cls, data: dict) -> "Report":
        """The inverse of to_json: the summary is computed again, not read."""
        kept = _known(cls, data)
        kept["cases"] = [CaseResult.from_json(c) for c in data.get("cases") or []]
        kept["identities"] = [IdentityResult.from_json(i) for i in data.get("identities") or []]
        kept["notes"] = list(data.get("notes") or [])
        return cls(**kept)
