"""Failing cases grouped by cause: one bug, one group.

A wrong base fails many cases whose messages differ only in their numbers ("base 10000 used instead
of 500000", "... instead of 1000000"). Cases are grouped by their diagnosis codes; within a group
the messages that differ only in numbers (or quoted names) become one line with each number shown
as a range ("instead of 500000 to 1000000") and each name as the list of names ("rope_type 'yarn',
'ntk'"). Skipped cases are grouped the same way by their reason.

Only posref's own templated messages are merged: an exception's own text (codes raised, crashed,
timeout; an ``Unsupported`` reason) is kept verbatim and grouped by its exact text, since its numbers
are the user's ("tensor a (2) must match ... at non-singleton dimension 4" must never read
"tensor a (2 to 8) ... dimension 4 to 5").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from conformance.reports._common import case_ratio, codes, fmt_float, messages

# A number not glued to a word or a single dot (a range "0..5" is two numbers), or a short quoted name.
_NUMBER = re.compile(r"(?<!\w)(?<![^.]\.)[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?!\w|\.(?!\.))|'[^'\s]{1,40}'")

# Diagnosis codes whose message is an exception's own text (isolation.KINDS other than ok), and the
# prefix of a skip reason that is an Unsupported's own text (runner.grade_case).
VERBATIM_CODES = frozenset({"raised", "crashed", "timeout"})
_VERBATIM_PREFIX = "unsupported: "


@dataclass
class Cause:
    """Cases failing for one reason: their codes (key), what the codes mean, the message lines
    with numbers as ranges (each with how many cases it covers), and the cases, worst first."""

    verdict: str
    codes: tuple
    meaning: str
    lines: list = field(default_factory=list)  # [(text, count)]
    cases: list = field(default_factory=list)

    @property
    def dtypes(self) -> list:
        return sorted({c.dtype for c in self.cases})

    def ratio_range(self) -> str:
        """"1.3 to 5.2e+05" (or one number), over the cases that have a ratio (under --grad the
        worse of the output's and the gradient's)."""
        values = [case_ratio(c) for c in self.cases if case_ratio(c) is not None]
        return _range([float(v) for v in values]) if values else ""


def _range(values: list) -> str:
    lo, hi = min(values), max(values)
    return fmt_float(lo) if fmt_float(lo) == fmt_float(hi) else f"{fmt_float(lo)} to {fmt_float(hi)}"


def _span(texts: list) -> str:
    """One number (or quoted name) as written, the range of several numbers ("500000 to
    1000000"), or the list of several names ("'yarn', 'ntk'")."""
    if len(set(texts)) == 1:
        return texts[0]
    if any(t.startswith("'") for t in texts):
        return ", ".join(dict.fromkeys(texts))
    lo, hi = min(texts, key=float), max(texts, key=float)
    return f"{lo} to {hi}"


def template(message: str) -> tuple[str, list]:
    """The message with every number replaced by {} (its own braces doubled, so that format gives
    them back), and the numbers as written."""
    numbers = _NUMBER.findall(message)
    return _NUMBER.sub("{}", message.replace("{", "{{").replace("}", "}}")), numbers


def merge(messages_: list, verbatim=None) -> list:
    """[(line, count)]: messages equal up to their numbers become one line with ranges, most
    frequent first. A message for which ``verbatim(text)`` is true (an exception's own text) is
    grouped by its exact text only: its numbers are never merged."""
    groups: dict = {}
    for text in messages_:
        if verbatim is not None and verbatim(text):
            groups.setdefault((text, 0), []).append((text, []))
            continue
        key, numbers = template(text)
        groups.setdefault((key, len(numbers)), []).append((text, numbers))
    merged = []
    for (key, n), rows in groups.items():
        if len({text for text, _ in rows}) == 1:
            merged.append((rows[0][0], len(rows)))
            continue
        columns = [[numbers[k] for _, numbers in rows] for k in range(n)]
        merged.append((key.format(*(_span(col) for col in columns)), len(rows)))
    return sorted(merged, key=lambda item: -item[1])


def _reason(case) -> str:
    msgs = messages(case.diagnoses)
    if msgs:
        return "; ".join(msgs)
    if case.notes:
        return str(case.notes[0])
    return "over its error budget" if case.verdict == "fail" else case.verdict


def failure_causes(cases, meanings: dict) -> list:
    """[Cause] of the failing and erroring cases, the largest group first; cases within a group
    worst (largest error / budget) first."""
    groups: dict = {}
    for c in cases:
        if c.verdict not in ("fail", "error"):
            continue
        key = (c.verdict, tuple(codes(c.diagnoses)) or ("over-budget",))
        groups.setdefault(key, []).append(c)
    out = []
    for (verdict, key), members in groups.items():
        members.sort(key=lambda c: -(case_ratio(c) if case_ratio(c) is not None else float("inf")))
        meaning = "; ".join(meanings.get(k, "") for k in key if meanings.get(k)) or (
            "the output is over its error budget, and no known mistake explains it"
            if key == ("over-budget",) else "")
        own_text = bool(VERBATIM_CODES.intersection(key))  # an exception's text: never merged
        lines = merge([_reason(c) for c in members], (lambda _text: True) if own_text else None)
        out.append(Cause(verdict, key, meaning, lines, members))
    return sorted(out, key=lambda g: (-len(g.cases), g.codes))


def skip_reasons(cases) -> list:
    """[(reason with ranges, count)] of the skipped cases, the most frequent first."""
    return merge([_reason(c) for c in cases if c.verdict == "skip"],
                 lambda text: text.startswith(_VERBATIM_PREFIX))


__all__ = ["Cause", "failure_causes", "merge", "skip_reasons", "template"]
