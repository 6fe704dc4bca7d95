"""Small helpers the report writers share: counts, the closing summary line, number formats."""

from __future__ import annotations

import math
import os
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
    return (
        f"posref {report.suite_version} {report.protocol}: {count_text(report)} "
        f"(vectors {short_digest(report.vectors_digest, digest_chars)})"
    )


def model_line(model: dict) -> str:
    """"llama-3.1-8b (https://...)" or "my_config (/path/config.json, sha256 abcd...)": the model a
    run graded at (Report.model)."""
    if model.get("source"):
        return f"{model.get('name')} ({model['source']})"
    return f"{model.get('name')} ({model.get('config')}, sha256 {str(model.get('sha256'))[:16]}...)"


def count_text(report) -> str:
    """"120 passed, 3 failed, 2 identities failed": the verdict counts of a report."""
    counts = report.summary()
    parts = []
    for key, word in _COUNT_WORDS:
        n = counts.get(key, 0)
        if n or key == "pass":
            parts.append(f"{n} {word}{'s' if key == 'error' and n != 1 else ''}")
    ids = counts.get("identity_failures", 0)
    if ids:
        parts.append(f"{ids} identit{'y' if ids == 1 else 'ies'} failed")
    expected_ids = counts.get("identity_xfail", 0)
    if expected_ids:
        parts.append(f"{expected_ids} identit{'y' if expected_ids == 1 else 'ies'} xfailed")
    training = training_words(report)
    if training:
        parts[-1] += f"; {training}"
    return ", ".join(parts)


def identity_counts(identities) -> str:
    """"22 passed, 2 failed, 1 skipped" for black-box identities: each verdict counted on its own
    (a skipped identity is neither passed nor failed), zero counts left out but "0 passed"."""
    counts: dict = {}
    for i in identities:
        key = "fail" if i.verdict == "error" else i.verdict
        counts[key] = counts.get(key, 0) + 1
    errors = sum(i.verdict == "error" for i in identities)
    words = dict(_COUNT_WORDS)
    parts = [f"{counts.get('pass', 0)} passed"]
    for key in ("fail", "xfail", "skip"):
        if counts.get(key):
            parts.append(f"{counts[key]} {words[key]}" + (f" ({errors} with an error)" if key == "fail" and errors else ""))
    parts += [f"{n} {v}" for v, n in counts.items() if v not in ("pass", "fail", "xfail", "skip")]
    return ", ".join(parts)


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
    """One short reason for a case's verdict: its first diagnosis message, else the ratio (the
    gradient's, when only the gradient fails)."""
    msgs = messages(case.diagnoses)
    if msgs:
        return "; ".join(msgs[:2]) + (f"; +{len(msgs) - 2} more" if len(msgs) > 2 else "")
    if case.verdict in ("skip", "error") and case.notes:
        return str(case.notes[0])
    role = worst_grad_role(case)
    if role is not None and _grad(case).get("verdict") in ("fail", "error") and \
            not (case.budget_ratio is not None and case.budget_ratio > 1):
        entry = _grad(case)["inputs"][role]
        return f"gradient of {role} {entry.get('verdict')}, budget ratio {fmt_float(entry.get('budget_ratio'))}"
    if case.budget_ratio is not None:
        return f"budget ratio {fmt_float(case.budget_ratio)}"
    return case.verdict


def failure_details(case) -> list:
    """Where a failing case fails, one line each: the mismatch count (as assert_close prints it),
    the worst element in the family's words with its error, the first failing position; then,
    under --grad, the same for each failing gradient (``grad_details``) and, under --autocast,
    the dtype the output arrived in (``output_dtype_note``)."""
    lines = []
    # Beside a gradient's lines the output's say whose they are; without --grad they are as ever.
    of = "output " if _grad(case) else ""
    if case.mismatch:
        m = case.mismatch
        lines.append(f"{of}mismatched: {_mismatch(m)}")
    if case.worst_location:
        err = f" (|error| {fmt_float(case.max_abs_error)})" if case.max_abs_error is not None else ""
        lines.append(f"{of}worst: {case.worst_location}{err}")
    if case.first_failing_position is not None:
        lines.append(f"{of}first failing position: {case.first_failing_position}")
    note = output_dtype_note(case)
    if note:
        lines.append(note)
    lines += grad_details(case)
    return lines


def _mismatch(m: dict) -> str:
    share = f" ({100.0 * m['count'] / m['total']:.1f}%)" if m["total"] else ""
    return f"{m['count']} of {m['total']} {m['unit']}{share}"


# --------------------------------------------------------------------------------------------
# Training runs (--grad, --autocast): CaseResult.grad and CaseResult.output_dtype.
# Every helper below returns nothing for a case graded without them, so the reports of ordinary
# runs stay as they were.


def _grad(case) -> dict:
    grad = getattr(case, "grad", None)
    return grad if isinstance(grad, dict) else {}


def autocast_dtype(case):
    """The dtype --autocast ran the case under (read from the runner's note
    "autocast bfloat16: the output arrived in ..."), or None."""
    for note in getattr(case, "notes", None) or ():
        text = str(note)
        if text.startswith("autocast ") and ": the output arrived in" in text:
            return text[len("autocast "):].split(":", 1)[0]
    return None


def graded_gradients(report) -> bool:
    """Whether any case's gradient was graded (--grad)."""
    return any(_grad(c) for c in report.cases)


def training_words(report) -> str:
    """"gradients graded (--grad)", "autocast bfloat16", both joined by ", ", or "" (from the
    run's options, report.training, or from the cases of a report that lacks them)."""
    training = getattr(report, "training", None)
    if training:
        grad, casts = training.get("grad"), [training["autocast"]] if training.get("autocast") else []
    else:
        grad = graded_gradients(report)
        casts = sorted({d for d in (autocast_dtype(c) for c in report.cases) if d})
    words = ["gradients graded (--grad)"] if grad else []
    if casts:
        words.append("autocast " + ", ".join(casts))
    return ", ".join(words)


def worst_grad_role(case):
    """The input whose gradient is worst (the largest error / budget; an error first), or None."""
    inputs = _grad(case).get("inputs") or {}
    if not inputs:
        return None
    rank = {"error": 3, "fail": 2, "acceptable": 1, "pass": 0}

    def key(role):
        e = inputs[role]
        r = e.get("budget_ratio")
        return (rank.get(e.get("verdict"), 0), -1.0 if r is None else float(r))

    return max(inputs, key=key)


def grad_summary(case) -> str:
    """"gradient fail, error/budget 3.02e+06 (worst: x)", or "" for a case without a graded
    gradient. A gradient that could not be graded says why ("gradient fail: the output does not
    require grad ...")."""
    grad = _grad(case)
    if not grad:
        return ""
    text = f"gradient {grad.get('verdict', '?')}"
    if grad.get("budget_ratio") is not None:
        text += f", error/budget {fmt_float(grad['budget_ratio'])}"
    inputs = grad.get("inputs") or {}
    if len(inputs) > 1:
        text += f" (worst: {worst_grad_role(case)})"
    if grad.get("problem"):
        text += f": {grad['problem']}"
    return text


def grad_details(case) -> list:
    """Where each failing gradient fails, worst input first, one line each in the words of
    ``failure_details``: "gradient of x: fail, error/budget 3.02e+06", "gradient of x mismatched:
    896 of 1024 pairs (87.5%)", "gradient of x worst: batch row 0, ... (|error| 3.88)"."""
    grad = _grad(case)
    if not grad or grad.get("verdict") not in ("fail", "error"):
        return []
    inputs = grad.get("inputs") or {}
    if not inputs:
        return [grad_summary(case)]
    worst = worst_grad_role(case)
    order = [worst] + [r for r in inputs if r != worst]
    lines = []
    for role in order:
        e = inputs[role]
        if e.get("verdict") not in ("fail", "error"):
            continue
        head = f"gradient of {role}: {e.get('verdict')}"
        if e.get("budget_ratio") is not None:
            head += f", error/budget {fmt_float(e['budget_ratio'])}"
        lines.append(head)
        if e.get("mismatch"):
            lines.append(f"gradient of {role} mismatched: {_mismatch(e['mismatch'])}")
        if e.get("worst_location"):
            err = f" (|error| {fmt_float(e['max_abs_error'])})" if e.get("max_abs_error") is not None else ""
            lines.append(f"gradient of {role} worst: {e['worst_location']}{err}")
    return lines


def output_dtype_note(case) -> str:
    """"output arrived in bfloat16 (inputs float32, autocast bfloat16)" when a training run's output
    dtype differs from the case's dtype; "" otherwise (and always for ordinary runs)."""
    out = getattr(case, "output_dtype", None)
    cast = autocast_dtype(case)
    if not out or out == case.dtype or not (cast or _grad(case)):
        return ""
    return f"output arrived in {out} (inputs {case.dtype}" + (f", autocast {cast})" if cast else ")")


def case_ratio(case):
    """The case's worse error / budget, forward or gradient (the forward's without --grad)."""
    ratios = [r for r in (case.budget_ratio, _grad(case).get("budget_ratio")) if r is not None]
    return max(ratios, key=float) if ratios else None


def citation(report, case) -> str:
    """The line a review quotes:
    "posref 0.1.0 rope.apply/llama2-d128/decode-4095 [bfloat16]: fail (positions shifted by +1)"
    (" compiled" after the dtype for a result graded under torch.compile)."""
    return f"posref {report.suite_version} {case_name(case)}: {case.verdict} ({case_reason(case)})"


def compiled_mark(case) -> str:
    """" compiled" for a result graded under torch.compile (--compile), "" for an eager one."""
    return " compiled" if getattr(case, "compiled", False) else ""


def case_name(case) -> str:
    """How every report names a result: "<case id> [<dtype>]", and " compiled" after it for the
    compiled half under --compile (the id stays the case's own, as with dtypes)."""
    return f"{case.id} [{case.dtype}]{compiled_mark(case)}"


def compile_line(report) -> str:
    """One line on --compile, "" without it: what ran, or why the compiled half did not."""
    info = getattr(report, "compile", None)
    if not isinstance(info, dict):
        return ""
    backend = info.get("backend", "?")
    if not info.get("ran"):
        return f"torch.compile (backend {backend}) not run: {info.get('reason') or 'unavailable'}; eager results only"
    compiled = [c for c in report.cases if getattr(c, "compiled", False)]
    faults = sum(1 for c in compiled if any(d.code == "compile-fault" for d in c.diagnoses))
    return (f"torch.compile (backend {backend}): {len(compiled)} compiled result(s), {faults} correct eagerly "
            "but wrong compiled (compile-fault)")


def triton_line(report) -> str:
    """One line on --triton-interpret, "" without it: the kernels ran in Triton's interpreter
    (conformance.triton_interpret.line)."""
    info = getattr(report, "triton_interpret", None)
    if not isinstance(info, dict):
        return ""
    from conformance.triton_interpret import line

    return line(info) + (" (in the isolated child)" if info.get("isolated") else "")


def not_a_report_file(path) -> str | None:
    """Why ``path`` must not be replaced by a report ("is a symbolic link: ...", "is a FIFO:
    ..."), or None for a regular file or a path that does not exist yet. Reports are written by
    renaming a new file over the path (reference.safe_files), which would turn a device
    (/dev/null), a FIFO or a symlink into a regular file; posref refuses those instead."""
    from reference.safe_files import not_a_regular_file

    return not_a_regular_file(path)


def write_text_atomic(path, text, *, parents: bool = True) -> None:
    """Write a whole file or nothing (a killed run never leaves half a report behind), only over
    a regular file or a new path, never through a link (reference.safe_files.write_atomic; the
    path is checked again there since the adapter ran in between). text may be str (written as
    UTF-8) or bytes; parents=False: a missing folder is an OSError, not created. ValueError
    (FileRefused) for a path that may not be written."""
    from reference.safe_files import write_atomic

    write_atomic(path, text, parents=parents)


def check_report_path(option: str, path, *, protected_dirs=(), protected_files=(), parents: bool = True) -> str:
    """The absolute path a report given as ``--option path`` will be written to; UsageError (one
    line, before any work) when it is empty, not a regular file or a new path (a directory, a
    symlink, a device such as /dev/full, a FIFO), lies under a file, or would replace what is
    being graded: a file inside one of ``protected_dirs`` (the vectors directory in use) or one
    of ``protected_files`` (the target's own source). Absolute, so that an adapter's os.chdir
    cannot move the report. parents=False: the folder must exist already."""
    from conformance.errors import UsageError

    if path is None or str(path) == "" or "\x00" in str(path):
        raise UsageError(f"{option}: {str(path)!r} is not a file name")
    p = Path(path).expanduser().absolute()
    problem = not_a_report_file(p)
    if problem:
        raise UsageError(f"{option}: {path} {problem}")
    parent = p.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if parent.exists() and not parent.is_dir():
        raise UsageError(f"{option}: cannot write {path}: {parent} is not a directory")
    if not parents and parent != p.parent:
        raise UsageError(f"{option}: cannot write {path}: the folder {p.parent} does not exist")
    # The entry the rename replaces: its folder with links resolved, and its own name.
    try:
        where = p.parent.resolve() / p.name
    except (OSError, RuntimeError):
        where = p
    for folder in protected_dirs:
        try:
            inside = where.is_relative_to(Path(folder).resolve())
        except (OSError, RuntimeError):
            inside = False
        if inside:
            raise UsageError(f"{option}: {path} lies inside the vectors directory being graded "
                             f"({folder}); write reports elsewhere")
    for source in protected_files:
        try:
            same = where == Path(source).resolve() or (where.exists() and os.path.samefile(where, source))
        except (OSError, RuntimeError):
            same = False
        if same:
            raise UsageError(f"{option}: {path} is the target's own source file; write reports elsewhere")
    return str(p)


def grad_overview(report) -> str:
    """"gradients (--grad): 10 graded: 2 passed, 8 acceptable; worst error/budget 0.436", or ""
    when no gradient was graded."""
    graded = [c for c in report.cases if _grad(c)]
    if not graded:
        return ""
    counts: dict = {}
    for c in graded:
        v = _grad(c).get("verdict", "?")
        counts[v] = counts.get(v, 0) + 1
    words = dict(_COUNT_WORDS)
    parts = [f"{counts[v]} {words.get(v, v)}{'s' if v == 'error' and counts[v] != 1 else ''}"
             for v in ("pass", "acceptable", "fail", "error") if counts.get(v)]
    ratios = [_grad(c)["budget_ratio"] for c in graded if _grad(c).get("budget_ratio") is not None]
    worst = f"; worst error/budget {fmt_float(max(ratios))}" if ratios else ""
    return f"gradients (--grad): {len(graded)} graded: {', '.join(parts)}{worst}"


def autocast_overview(report) -> list:
    """One line per (autocast, input dtype, output dtype): "autocast bfloat16: 10 outputs arrived
    in bfloat16 (inputs float32)"; [] without --autocast."""
    groups: dict = {}
    for c in report.cases:
        cast = autocast_dtype(c)
        if cast and c.output_dtype:
            key = (cast, c.dtype, c.output_dtype)
            groups[key] = groups.get(key, 0) + 1
    return [f"autocast {cast}: {n} output{'s' if n != 1 else ''} arrived in {out} (inputs {dt})"
            for (cast, dt, out), n in groups.items()]
