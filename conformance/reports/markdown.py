"""``--markdown FILE``: a summary a reviewer pastes into a review or an issue.

It opens with the causes of the failures grouped by diagnosis code (as the terminal report does),
the seed of the fresh cases and the run's notes; then it cites what makes the verdict
reproducible (suite version, the full vectors digest, target, environment), the counts with a
line saying what "acceptable" means, a table of failing cases and identities with their
diagnoses, a block of citable ids (one per failing case, e.g. "posref 0.1.0
rope.apply/llama2-d128/decode-4095 [bfloat16]": the table already says why), and the command that
reproduces the first failure.
A run with --grad adds the gradients' counts, a "gradient" column (verdict, error / budget, worst
input) and a table of the failing gradients (input, mismatch, worst element); under --autocast the
dtype the output arrived in is shown where it differs from the input dtype.
"""

from __future__ import annotations

import re

from conformance.isolation import printable
from conformance.reports._common import autocast_overview, case_reason, codes, fmt_float, grad_overview, \
    graded_gradients, messages, model_line, output_dtype_note, summary_line, worst_grad_role, write_text_atomic, \
    case_name, compile_line, compiled_mark, triton_line

MAX_ROWS = 50  # a review comment stays readable; the JSON report has everything
MAX_MESSAGES = 4  # distinct messages shown per cause, as in the terminal report
ACCEPTABLE = ("*acceptable*: within the standard error budget (the rounding the dtype allows) but over "
              "the strict one; expected, not a bug.")


_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# What Markdown or the HTML it may hold would act on in a message from the adapter: raw HTML
# (<script>, </details> closing the report's own blocks), links and images (![x](http://...)),
# emphasis and code spans. Escaped, the reader sees the characters as written.
_ACTIVE = re.compile(r"[\\`*_\[\]<>&!~#|]")
_ENTITIES = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}


class _Code(str):
    """A cell already written as a code span (``_code``): shown as is, not escaped again."""


def _text(text) -> str:
    """Plain text from anywhere (an adapter's message, a type name) as inert Markdown: HTML
    characters as entities, Markdown punctuation backslash-escaped, control characters and line
    breaks as spaces."""
    flat = _flat(text)
    return _ACTIVE.sub(lambda m: _ENTITIES.get(m.group(), "\\" + m.group()), flat)


def _flat(text) -> str:
    """One line: line breaks and runs of spaces as one space, every other character a terminal
    or an encoder would choke on escaped (\\x1b, a lone surrogate)."""
    return printable(" ".join(_CONTROL.sub(" ", str(text)).split()))


def _cell(text) -> str:
    """Markdown table cell: one line, no control characters, pipes escaped; text that is not a
    code span is escaped (``_text``)."""
    if isinstance(text, _Code):
        return str(text).replace("|", "\\|") or " "
    return _text(text) or " "


def _row(*cells) -> str:
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def _fence(text, char="`", least=1) -> str:
    """A fence of ``char`` longer than the longest run of it in text (so text cannot close it)."""
    runs = [len(m.group()) for m in re.finditer(re.escape(char) + "+", str(text))]
    return char * max(least, max(runs, default=0) + 1)


def _code(text) -> str:
    """A code span: inside it Markdown and HTML are shown as written; the fence is longer than
    any run of backticks in the text, so the text cannot end it early."""
    text = _flat(text)
    fence = _fence(text) if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return _Code(f"{fence}{pad}{text}{pad}{fence}")


def _environment(env) -> str:
    parts = []
    for key, value in (env or {}).items():
        if isinstance(value, (list, tuple)):
            value = ", ".join(str(v) for v in value)
        parts.append(f"{key} {value}")
    return "; ".join(parts) or "-"


def render(report, *, max_rows: int = MAX_ROWS) -> str:
    summary = report.summary()
    overall = summary["overall"].upper()
    bad_cases = [c for c in report.cases if c.verdict in ("fail", "error") and not c.expected_failure]
    bad_ids = [i for i in report.identities if i.verdict in ("fail", "error")]
    skipped = [c for c in report.cases if c.verdict == "skip"]

    out = [f"## posref conformance: {report.protocol} — {overall}", ""]
    out += [f"`{summary_line(report, digest_chars=None)}`", ""]
    # As the terminal: the causes first, then what repeats the run, then the tables (issue 25).
    out += _causes(report)
    if report.seed is not None:
        out += [f"Fresh cases were drawn from seed {report.seed}: {_code(f'--seed {report.seed}')} "
                "draws them again.", ""]
    if report.notes:
        out += [f"- Note: {_text(note)}" for note in report.notes] + [""]
    out += ["| | |", "|---|---|"]
    out.append(_row("Suite version", report.suite_version))
    out.append(_row("Vectors digest", _code(report.vectors_digest)))
    out.append(_row("Protocol", report.protocol))
    out.append(_row("Target", _code(report.target)))
    if report.model:
        out.append(_row("Model", _text(model_line(report.model))))
    out.append(_row("Profile", report.profile))
    if report.probe:
        out.append(_row("Probe", report.probe.get("summary") or "-"))
    out.append(_row("Environment", _environment(report.environment)))
    out.append("")

    # Identities counted passed, failed and skipped apart: a skipped one is neither (issue 25).
    ids = {v: sum(i.verdict in vs for i in report.identities)
           for v, vs in (("pass", ("pass",)), ("fail", ("fail", "error")), ("skip", ("skip",)))}
    out += ["| pass | acceptable | fail | error | xfail | skip | identities passed | identities failed "
            "| identities skipped |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    out.append(_row(*(summary[k] for k in ("pass", "acceptable", "fail", "error", "xfail", "skip")),
                    ids["pass"], ids["fail"], ids["skip"]))
    out.append("")
    out += [ACCEPTABLE, ""]
    grads = graded_gradients(report)
    training = ([grad_overview(report)] if grads else []) + autocast_overview(report)
    training += [compile_line(report)] if compile_line(report) else []
    training += [triton_line(report)] if triton_line(report) else []
    if training:
        out += [f"- {_text(line)}" for line in training] + [""]
    if report.baseline:
        base = report.baseline
        out.append(f"Expected failures: {base['expected']} case(s) listed in {_code(base['file'])} failed "
                   f"as expected; {len(base['fixed'])} listed case(s) pass now"
                   + (f" ({', '.join(_code(f) for f in base['fixed'][:max_rows])})" if base["fixed"] else "")
                   + ".")
        out.append("")

    if bad_cases:
        out += [f"### Failing cases ({len(bad_cases)})", ""]
        if grads:  # one more column: the gradient's verdict and error / budget
            out += ["| case | dtype | verdict | error / budget | gradient | max abs error | diagnoses |",
                    "|---|---|---|---:|---|---:|---|"]
        else:
            out += ["| case | dtype | verdict | error / budget | max abs error | diagnoses |",
                    "|---|---|---|---:|---:|---|"]
        for c in bad_cases[:max_rows]:
            diag = "; ".join(f"{code}: {msg}" for code, msg in zip(codes(c.diagnoses),
                                                                   messages(c.diagnoses)))
            dtype = c.dtype + compiled_mark(c) + (f" ({output_dtype_note(c)})" if output_dtype_note(c) else "")
            extra = (_grad_cell(c),) if grads else ()
            out.append(_row(_code(c.id), dtype, c.verdict, fmt_float(c.budget_ratio), *extra,
                            fmt_float(c.max_abs_error), diag or "-"))
        if len(bad_cases) > max_rows:
            out.append("")
            out.append(f"…and {len(bad_cases) - max_rows} more (see the JSON report).")
        out.append("")
    else:
        graded = sum(summary[k] for k in ("pass", "acceptable"))
        both = " (outputs and gradients)" if grads else ""
        out += [f"All {graded} graded cases are within their error budgets{both}.", ""]

    bad_grads = [c for c in bad_cases if (c.grad or {}).get("verdict") in ("fail", "error")]
    if bad_grads:
        out += [f"### Failing gradients ({len(bad_grads)})", ""]
        out += ["| case | dtype | input | verdict | error / budget | max abs error | mismatched | worst at |",
                "|---|---|---|---|---:|---:|---|---|"]
        for c in bad_grads[:max_rows]:
            out += _grad_rows(c)
        if len(bad_grads) > max_rows:
            out.append("")
            out.append(f"…and {len(bad_grads) - max_rows} more (see the JSON report).")
        out.append("")

    if bad_ids:
        out += [f"### Failing black-box identities ({len(bad_ids)})", ""]
        out += ["| identity | dtype | verdict | residual | bound | message |",
                "|---|---|---|---:|---:|---|"]
        for i in bad_ids[:max_rows]:
            out.append(_row(_code(i.id), i.dtype, i.verdict, fmt_float(i.residual),
                            fmt_float(i.bound), i.message or "; ".join(messages(i.diagnoses))))
        out.append("")

    if bad_cases:
        out += ["### Citations", "", "```text"]
        out += [f"posref {report.suite_version} {case_name(c)}" for c in bad_cases[:max_rows]]
        out += ["```", ""]
        repro = next((c.repro for c in bad_cases if c.repro), "")
        if repro:
            # A repro is a posref command line, or Python when the adapter was a callable.
            language = "shell" if repro.startswith("posref ") else "python"
            fence = _fence(repro, least=3)  # a target named with ``` cannot end the block
            out += ["<details><summary>Reproduce the first failure</summary>", "", f"{fence}{language}",
                    "\n".join(printable(line) for line in repro.rstrip().splitlines()), fence, "", "</details>", ""]

    if skipped:
        out += [f"<details><summary>Skipped cases ({len(skipped)})</summary>", ""]
        out += [f"- {_code(c.id)} \\[{c.dtype}\\]{compiled_mark(c)}: {_text(case_reason(c))}" for c in skipped[:max_rows]]
        if len(skipped) > max_rows:
            out.append(f"- …and {len(skipped) - max_rows} more")
        out += ["", "</details>", ""]
    return "\n".join(out)


def _causes(report) -> list:
    """The failing cases grouped by diagnosis code, as the terminal report opens with them: one
    bullet per cause (codes, count, dtypes, error / budget, what the codes mean) and its messages
    with numbers as ranges."""
    from conformance.core import registry
    from conformance.reports.causes import failure_causes

    causes = failure_causes([c for c in report.cases if not c.expected_failure], registry.codes())
    if not causes:
        return []
    bad = sum(len(c.cases) for c in causes)
    out = [f"### Causes ({bad} failing case{'s' if bad != 1 else ''}, by diagnosis code)", ""]
    for cause in causes:
        n = len(cause.cases)
        head = f"**{cause.verdict.upper()} {_text(', '.join(cause.codes))}**: {n} case{'s' if n != 1 else ''} " \
               f"({', '.join(cause.dtypes)})"
        if cause.ratio_range():
            head += f", error/budget {cause.ratio_range()}"
        if cause.meaning:
            head += f": {_text(cause.meaning)}"
        out.append(f"- {head}")
        for text, count in cause.lines[:MAX_MESSAGES]:
            out.append(f"  - {_text(text)}" + (f" ({count} case{'s' if count != 1 else ''})"
                                                if len(cause.lines) > 1 else ""))
        if len(cause.lines) > MAX_MESSAGES:
            out.append(f"  - …and {len(cause.lines) - MAX_MESSAGES} other messages")
    return out + [""]


def _grad_cell(case) -> str:
    """"fail, 3.02e+06 (x)": the gradient's verdict, error / budget and worst input; "-" without."""
    grad = case.grad or {}
    if not grad:
        return "-"
    text = str(grad.get("verdict", "?"))
    if grad.get("budget_ratio") is not None:
        text += f", {fmt_float(grad['budget_ratio'])}"
    role = worst_grad_role(case)
    return text + (f" ({role})" if role is not None else "")


def _grad_rows(case) -> list:
    """Rows of the failing-gradient table: each failing input, worst first."""
    grad = case.grad or {}
    inputs = grad.get("inputs") or {}
    if not inputs:
        return [_row(_code(case.id), case.dtype, "-", grad.get("verdict", "?"), "-", "-", "-",
                     grad.get("problem") or "-")]
    worst = worst_grad_role(case)
    rows = []
    for role in [worst] + [r for r in inputs if r != worst]:
        e = inputs[role]
        if e.get("verdict") not in ("fail", "error"):
            continue
        m = e.get("mismatch")
        mismatched = f"{m['count']} of {m['total']} {m['unit']}" if m else "-"
        rows.append(_row(_code(case.id), case.dtype, role, e.get("verdict"), fmt_float(e.get("budget_ratio")),
                         fmt_float(e.get("max_abs_error")), mismatched, e.get("worst_location") or "-"))
    return rows


def write(report, path) -> None:
    write_text_atomic(path, render(report))
