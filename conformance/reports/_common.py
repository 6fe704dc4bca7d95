"""Small helpers the report writers share: counts, the closing summary line, number formats."""

from __future__ import annotations

import math
import os
import stat
import tempfile
from pathlib import Path
from typing import Optional

# Order in which counts are spoken in summary lines, with the word used for each.
_COUNT_WORDS = (
    ("pass", "passed"),
    ("acceptable", "acceptable"),
    ("fail", "failed"),
    ("error", "error"),
    ("xfail", "xfailed"),
    ("fixed", "fixed"),
    ("skip", "skipped"),
)


def summary_line(report, *, digest_chars: Optional[int] = 16) -> str:
    """The closing line, e.g.
    "posref 0.1.0 rope.apply: 120 passed, 3 failed, 4 skipped (vectors sha256:abcd...)".

    Counts other than "passed" appear only when non-zero; failing black-box identities are
    counted too. digest_chars=None keeps the whole digest.
    """
    counts = report.summary()
    parts = []
    for key, word in _COUNT_WORDS:
        n = counts.get(key, 0)
        if n or key == "pass":
            parts.append(f"{n} {word}{'s' if key == 'error' and n != 1 else ''}")
    ids = counts.get("identity_failures", 0)
    if ids:
        parts.append(f"{ids} identit{'y' if ids == 1 else 'ies'} failed")
    return (
        f"posref {report.suite_version} {report.protocol}: {', '.join(parts)} "
        f"(vectors {short_digest(report.vectors_digest, digest_chars)})"
    )


def short_digest(digest: str, chars: Optional[int] = 16) -> str:
    """"sha256:0123456789abcdef..." keeping the algorithm prefix and `chars` hex digits."""
    if chars is None or not digest:
        return digest or "?"
    algo, sep, hexpart = digest.partition(":")
    if not sep:
        algo, hexpart = "", digest
    if len(hexpart) <= chars:
        return digest
    return f"{algo}{sep}{hexpart[:chars]}..."


def fmt_float(value, digits: int = 3) -> str:
    """A compact number for tables: '-' when missing, 'inf'/'nan' spelled out."""
    if value is None:
        return "-"
    try:
        v = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v == 0:
        return "0"
    if 1e3 <= abs(v) < 1e4:
        return f"{v:.0f}"  # "1203", not "1.2e+03"
    if 1e-3 <= abs(v) < 1e3:
        return f"{v:.{digits}g}"
    return f"{v:.{max(digits - 1, 1)}e}"


def codes(diagnoses) -> list:
    """Diagnosis codes of a case (Diagnosis objects or plain dicts)."""
    return [d["code"] if isinstance(d, dict) else d.code for d in diagnoses]


def messages(diagnoses) -> list:
    return [d["message"] if isinstance(d, dict) else d.message for d in diagnoses]


def case_reason(case) -> str:
    """One short reason for a case's verdict: its first diagnosis message, else the ratio."""
    msgs = messages(case.diagnoses)
    if msgs:
        return "; ".join(msgs[:2]) + (f"; +{len(msgs) - 2} more" if len(msgs) > 2 else "")
    if case.verdict in ("skip", "error") and case.notes:
        return str(case.notes[0])
    if case.budget_ratio is not None:
        return f"budget ratio {fmt_float(case.budget_ratio)}"
    return case.verdict


def failure_details(case) -> list:
    """Where a failing case fails, one line each: the mismatch count (as assert_close prints it),
    the worst element in the family's words with its error, the first failing position."""
    lines = []
    if case.mismatch:
        m = case.mismatch
        share = f" ({100.0 * m['count'] / m['total']:.1f}%)" if m["total"] else ""
        lines.append(f"mismatched: {m['count']} of {m['total']} {m['unit']}{share}")
    if case.worst_location:
        err = f" (|error| {fmt_float(case.max_abs_error)})" if case.max_abs_error is not None else ""
        lines.append(f"worst: {case.worst_location}{err}")
    if case.first_failing_position is not None:
        lines.append(f"first failing position: {case.first_failing_position}")
    return lines


def citation(report, case) -> str:
    """The line a review quotes:
    "posref 0.1.0 rope.apply/llama2-d128/decode-4095 [bfloat16]: fail (positions shifted by +1)"."""
    return f"posref {report.suite_version} {case.id} [{case.dtype}]: {case.verdict} ({case_reason(case)})"


def not_a_report_file(path) -> str | None:
    """Why ``path`` must not be replaced by a report ("is a symbolic link", ...), or None for a
    regular file or a path that does not exist yet. Reports are written by renaming a new file
    over the path, which would turn a device (/dev/null), a FIFO or a symlink into a regular file;
    posref refuses those instead of writing through them."""
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):  # a new path (a bad parent is reported apart)
        return None
    except OSError as exc:
        return f"cannot be checked ({exc.strerror})"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a directory, not a file"
    kinds = [(stat.S_ISLNK, "a symbolic link"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket")]
    kind = next((name for test, name in kinds if test(mode)), "not a regular file")
    return f"is {kind}: reports are written only to regular files or new paths"


def write_text_atomic(path, text) -> None:
    """Write a whole file or nothing (a killed run never leaves half a report behind), only over
    a regular file or a new path (``not_a_report_file``, checked again here since the adapter ran
    in between). text may be str (written as UTF-8) or bytes."""
    path = Path(path)
    problem = not_a_report_file(path)
    if problem:
        raise ValueError(f"{path} {problem}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8") if isinstance(text, str) else text)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual permissions
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
