"""Expected failures: a baseline of known failing cases (``--expected-failures FILE``).

A team adopting posref on an implementation with known gaps lists them once; the run then stays
green while nothing new breaks, and says when a listed case starts passing so the file can shrink.

The file is text, one entry per line: a case id with its dtype as reports cite it
(``rope.apply/llama2-d128/decode-4095 [bfloat16]``), or a case id alone for every dtype; glob
patterns are allowed (``rope.apply/*/around-2p24``). ``#`` starts a comment. ``posref conform
--write-expected-failures FILE`` writes the failing cases of a run in this format.

Applied to a report (``apply``): a failing or erroring case that an entry matches is an expected
failure (``CaseResult.expected_failure``; counted as ``xfail``, not as ``fail``/``error``); a
passing case that an entry matches is ``fixed`` (reported, so the entry can go); entries that
match no graded case are noted as stale.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from conformance.errors import UsageError

MAX_BYTES = 1 << 20
_ENTRY = re.compile(r"^(?P<id>\S+)(?:\s+\[(?P<dtype>[a-z0-9_]+)\])?$")


@dataclass(frozen=True)
class Entry:
    pattern: str
    dtype: Optional[str]  # None: every dtype
    line: int

    def matches(self, case) -> bool:
        """case: anything with ``id`` and ``dtype`` (None: a dtype-free pytest item, any dtype)."""
        dtype_ok = self.dtype is None or case.dtype is None or self.dtype == case.dtype
        return dtype_ok and fnmatch.fnmatchcase(case.id, self.pattern)

    def __str__(self) -> str:
        return self.pattern + (f" [{self.dtype}]" if self.dtype else "")


@dataclass(frozen=True)
class Baseline:
    path: str
    entries: tuple

    def match(self, case) -> Optional[Entry]:
        return next((e for e in self.entries if e.matches(case)), None)


def parse(text: str, path: str = "<baseline>") -> Baseline:
    """A Baseline from the file's text; UsageError (one line, with the line number) on a bad line."""
    entries = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = _ENTRY.match(line)
        if m is None or "/" not in m["id"]:
            raise UsageError(f"--expected-failures: {path}:{number}: expected '<case id> [<dtype>]', "
                             f"got {line[:80]!r}")
        entries.append(Entry(m["id"], m["dtype"], number))
    return Baseline(str(path), tuple(entries))


def load(path) -> Baseline:
    """Read and parse FILE; UsageError when it cannot be read or is not a baseline."""
    p = Path(path)
    try:
        if not p.is_file():
            raise UsageError(f"--expected-failures: {path}: not a file")
        if p.stat().st_size > MAX_BYTES:
            raise UsageError(f"--expected-failures: {path}: larger than {MAX_BYTES} bytes")
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--expected-failures: cannot read {path}: {exc}") from None
    return parse(text, str(path))


def apply(report, baseline: Baseline) -> None:
    """Mark the report's expected failures and record what the baseline found in
    ``report.baseline``: {"file", "entries", "expected": n, "fixed": [ids], "stale": [entries]}."""
    used, fixed, expected = set(), [], 0
    for case in report.cases:
        entry = baseline.match(case)
        if entry is None:
            continue
        used.add(entry)
        if case.verdict in ("fail", "error"):
            case.expected_failure = True
            expected += 1
        elif case.verdict in ("pass", "acceptable"):
            fixed.append(f"{case.id} [{case.dtype}]")
    stale = [str(e) for e in baseline.entries if e not in used]
    report.baseline = {"file": baseline.path, "entries": len(baseline.entries), "expected": expected,
                       "fixed": fixed, "stale": stale}


def render(report) -> str:
    """The failing cases of a report as a baseline file."""
    lines = [f"# posref {report.suite_version} {report.protocol}: expected failures of {report.target}",
             "# one '<case id> [<dtype>]' per line; see `posref conform --help`"]
    lines += [f"{c.id} [{c.dtype}]" for c in report.cases if c.verdict in ("fail", "error")]
    return "\n".join(lines) + "\n"


__all__ = ["Baseline", "Entry", "apply", "load", "parse", "render"]
