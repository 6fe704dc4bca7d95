"""Expected failures: a baseline of known failing cases (``--expected-failures FILE``).

A team adopting posref on an implementation with known gaps lists them once; the run then stays
green while nothing new breaks, and says when a listed case starts passing so the file can shrink.

The file is text, one entry per line: a case id with its dtype as reports cite it
(``rope.apply/llama2-d128/decode-4095 [bfloat16]``), or a case id alone for every dtype; glob
patterns are allowed (``rope.apply/*/around-2p24``). ``#`` starts a comment. Three kinds of entry:

- a golden case id (or a glob over them);
- a fresh case's *kind* (reference.golden.fresh): fresh ids say what was drawn, never the seed
  (``rope.apply/fresh/shape-dim-d80-r20-half``), and the kind is the glob over everything that
  draw can give (``rope.apply/fresh/shape-dim-*``), so a baseline keeps matching when the next
  run draws another head size from another seed;
- a black-box identity: ``identity:<protocol>/<identity id> [<dtype>]``
  (``identity:rope.apply/position-zero [float32]``).

``posref conform --write-expected-failures FILE`` writes the failing cases of a run in this
format: golden ids, the kinds of the failing fresh cases, and the failing identities.

Applied to a report (``apply``): a failing or erroring case that an entry matches is an expected
failure (``CaseResult.expected_failure``; counted as ``xfail``, not as ``fail``/``error``); a
failing identity that an entry matches gets the verdict ``xfail``; a passing case or identity that
an entry matches is ``fixed`` (reported, so the entry can go); entries that match nothing graded
are noted as stale.

Matching is bounded (issue 24: a 1 MiB file of 35,303 globs took 5 s per case through fnmatch,
whose cache of compiled patterns holds fewer): exact ids are looked up in a dict, globs are
bucketed by the protocol and group they start with and compiled once, a few hundred to a regular
expression, and the matching stops at the run's deadline (``--max-time``) with a one-line note.
"""

from __future__ import annotations

import fnmatch
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from conformance.errors import UsageError

MAX_BYTES = 1 << 20
MAX_ENTRY = 512  # characters in one entry: case ids are far shorter, and one huge glob is one huge regex
MAX_WILDCARDS = 8  # "*" and "?" in one entry: each one is a group in its regex
IDENTITY = "identity:"  # an entry for a black-box identity: identity:<protocol>/<identity id>
CHUNK = 256  # globs per compiled regular expression (a chunk compiles in milliseconds)
CHUNK_CHARS = 8192  # and characters of glob per regular expression
_ENTRY = re.compile(r"^(?P<id>\S+)(?:\s+\[(?P<dtype>[a-z0-9_]+)\])?$")
_MAGIC = re.compile(r"[*?\[]")


class DeadlineReached(Exception):
    """The run's deadline passed while matching (apply turns it into a note)."""


@dataclass(frozen=True)
class Entry:
    pattern: str
    dtype: Optional[str]  # None: every dtype
    line: int

    def dtype_ok(self, dtype) -> bool:
        """dtype None: a dtype-free pytest item, any dtype."""
        return self.dtype is None or dtype is None or self.dtype == dtype

    def matches(self, case) -> bool:
        """case: anything with ``id`` and ``dtype`` (None: a dtype-free pytest item, any dtype)."""
        return self.dtype_ok(case.dtype) and _compiled(self.pattern).match(case.id) is not None

    def __str__(self) -> str:
        return self.pattern + (f" [{self.dtype}]" if self.dtype else "")


def _compiled(pattern: str):
    return re.compile(fnmatch.translate(pattern))


def _bucket(pattern: str) -> tuple:
    """(protocol, group) of the literal text a glob starts with: every id it can match starts with
    "<protocol>/<group>/" (None where the glob's first magic character comes before that part)."""
    magic = _MAGIC.search(pattern)
    complete = pattern[:magic.start() if magic else len(pattern)].split("/")[:-1]
    return (complete[0] if complete else None, complete[1] if len(complete) > 1 else None)


def _buckets(case_id: str) -> tuple:
    """The buckets whose globs can match ``case_id``."""
    parts = case_id.split("/")
    protocol = parts[0] if len(parts) > 1 else None
    group = parts[1] if len(parts) > 2 else None
    return tuple(dict.fromkeys(((protocol, group), (protocol, None), (None, None))))


class _Index:
    """Exact ids in a dict; globs in buckets by the protocol and group they start with, each bucket
    in chunks that compile (once, when first needed) to one regular expression: a filter before
    the chunk's own patterns run. A case only meets the globs of its own buckets."""

    def __init__(self, entries):
        self.exact: dict = {}
        buckets: dict = {}
        for e in entries:
            if _MAGIC.search(e.pattern):
                buckets.setdefault(_bucket(e.pattern), []).append(e)
            else:
                self.exact.setdefault(e.pattern, []).append(e)
        self.chunks = {key: [_Chunk(part) for part in _chunked(globs)] for key, globs in buckets.items()}

    def matches(self, case_id: str, dtype, deadline: Optional[float]) -> list:
        found = [e for e in self.exact.get(case_id, ()) if e.dtype_ok(dtype)]
        for key in _buckets(case_id):
            for chunk in self.chunks.get(key, ()):
                if deadline is not None and time.monotonic() >= deadline:
                    raise DeadlineReached()
                found += chunk.matches(case_id, dtype)
        return sorted(found, key=lambda e: e.line)


def _chunked(globs) -> list:
    """Runs of at most CHUNK globs and CHUNK_CHARS characters: one chunk compiles in a bounded time
    (a glob's regex grows with its "*"s, and a regex of many long ones compiles slowly)."""
    parts, part, size = [], [], 0
    for e in globs:
        if part and (len(part) == CHUNK or size + len(e.pattern) > CHUNK_CHARS):
            parts.append(part)
            part, size = [], 0
        part.append(e)
        size += len(e.pattern)
    return parts + ([part] if part else [])


class _Chunk:
    def __init__(self, entries):
        self.entries = entries
        self.regex = None
        self.own = None

    def matches(self, case_id: str, dtype) -> list:
        if self.regex is None:
            self.regex = re.compile("|".join(fnmatch.translate(e.pattern) for e in self.entries))
        if self.regex.match(case_id) is None:
            return []
        if self.own is None:
            self.own = [_compiled(e.pattern) for e in self.entries]
        return [e for e, rx in zip(self.entries, self.own) if e.dtype_ok(dtype) and rx.match(case_id)]


@dataclass(frozen=True)
class Baseline:
    path: str
    entries: tuple
    _index: list = field(default_factory=list, init=False, repr=False, compare=False)

    def matches(self, case, deadline: Optional[float] = None) -> list:
        """Every entry that matches ``case`` (``id``, ``dtype``), in file order; DeadlineReached
        once time.monotonic() passes ``deadline``."""
        if not self._index:
            self._index.append(_Index(self.entries))
        return self._index[0].matches(case.id, case.dtype, deadline)

    def match(self, case) -> Optional[Entry]:
        """The first entry that matches ``case``, or None."""
        found = self.matches(case)
        return found[0] if found else None


def parse(text: str, path: str = "<baseline>") -> Baseline:
    """A Baseline from the file's text; UsageError (one line, with the line number) on a bad line."""
    entries = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if len(line) > MAX_ENTRY:
            raise UsageError(f"--expected-failures: {path}:{number}: an entry of {len(line)} characters "
                             f"(at most {MAX_ENTRY})")
        wildcards = line.count("*") + line.count("?")
        if wildcards > MAX_WILDCARDS:
            raise UsageError(f"--expected-failures: {path}:{number}: {wildcards} wildcards in one entry "
                             f"(at most {MAX_WILDCARDS})")
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


@dataclass(frozen=True)
class _Listed:
    """What an entry is matched against: a case's id, or ``identity:<protocol>/<id>``."""

    id: str
    dtype: Optional[str]


def identity_key(protocol: str, identity_id: str) -> str:
    """``identity:<protocol>/<name>`` (identity ids mostly carry their protocol already)."""
    name = str(identity_id)
    return IDENTITY + (name if name.startswith(f"{protocol}/") else f"{protocol}/{name}")


def apply(report, baseline: Baseline, *, deadline: Optional[float] = None, limit: str = "") -> None:
    """Mark the report's expected failures and record what the baseline found in
    ``report.baseline``: {"file", "entries", "expected": n, "expected_identities": n,
    "fixed": [ids], "stale": [entries]}.

    deadline: a time.monotonic() value (the run's --max-time); matching stops there, the results
    not matched yet count as unlisted, and a one-line note (naming ``limit``) says so."""
    used, fixed, expected, expected_ids = set(), [], 0, 0
    graded = [(c, _Listed(c.id, c.dtype), False) for c in report.cases]
    graded += [(i, _Listed(identity_key(report.protocol, i.id), i.dtype), True) for i in report.identities]
    done = 0
    try:
        for result, listed, is_identity in graded:
            found = baseline.matches(listed, deadline)
            done += 1
            if not found:
                continue
            used.update(found)
            if result.verdict in ("fail", "error"):
                if is_identity:
                    result.verdict = "xfail"
                    result.message = (f"expected failure ({baseline.path}:{found[0].line}): "
                                      f"{result.message or 'failed'}")
                    expected_ids += 1
                else:
                    result.expected_failure = True
                    expected += 1
            elif result.verdict in ("pass", "acceptable"):
                fixed.append(f"{listed.id} [{listed.dtype}]")
    except DeadlineReached:
        report.notes.append(f"--expected-failures: matching {baseline.path} stopped at the run's time limit"
                            f"{f' ({limit})' if limit else ''} after {done} of {len(graded)} results; "
                            "the rest count as not listed")
    stale = [str(e) for e in baseline.entries if e not in used] if done == len(graded) else []
    report.baseline = {"file": baseline.path, "entries": len(baseline.entries), "expected": expected,
                       "expected_identities": expected_ids, "fixed": fixed, "stale": stale}


def render(report) -> str:
    """The failing cases of a report as a baseline file: golden ids, the kinds of the fresh cases
    (reference.golden.fresh.kind_of), the failing identities.

    A fresh case's kind is listed when its case failed, and also when it was skipped and its kind
    has other draws: another seed draws another variant of the same kind (the other pair layout, say), which the next run grades
    instead of skipping; listed, it cannot turn that run red for a fault this one already showed
    (if it passes, the run reports the entry as fixed)."""
    from reference.golden.fresh import is_fresh, kind_of

    lines = [f"# posref {report.suite_version} {report.protocol}: expected failures of {report.target}",
             "# one '<case id> [<dtype>]' or 'identity:<protocol>/<identity> [<dtype>]' per line; a fresh case is "
             "listed by its kind (a glob over every draw of it); see `posref conform --help`"]
    seen = set()
    for c in report.cases:
        fresh = is_fresh(c.id) and report.seed is not None
        if c.verdict not in ("fail", "error") and not (fresh and c.verdict == "skip"):
            continue
        kind = kind_of(c.id, report.seed) if fresh else c.id
        entry = f"{kind} [{c.dtype}]"
        if entry in seen or (c.verdict == "skip" and kind == c.id):  # a place every seed fills alike
            continue
        seen.add(entry)
        why = []
        if kind != c.id:
            why.append(f"the kind of {c.id}")
        if c.verdict == "skip":
            why.append("skipped in this run, listed for the draws a run grades")
        lines.append(entry + (f"  # {'; '.join(why)}" if why else ""))
    lines += [f"{identity_key(report.protocol, i.id)} [{i.dtype}]" for i in report.identities
              if i.verdict in ("fail", "error")]
    return "\n".join(lines) + "\n"


__all__ = ["Baseline", "DeadlineReached", "Entry", "IDENTITY", "apply", "identity_key", "load", "parse", "render"]
