"""``--markdown FILE``: a summary a reviewer pastes into a review or an issue.

It cites what makes the verdict reproducible (suite version, the full vectors digest, target,
environment), the counts, a table of failing cases and identities with their diagnoses, a block of
citable ids (one per failing case, e.g. "posref 0.1.0 rope.apply/llama2-d128/decode-4095
[bfloat16]": the table already says why), and the command that reproduces the first failure.
"""

from __future__ import annotations

import re

from conformance.reports._common import case_reason, codes, fmt_float, messages, summary_line, \
    write_text_atomic

MAX_ROWS = 50  # a review comment stays readable; the JSON report has everything


_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _cell(text) -> str:
    """Markdown table cell: no line breaks or control characters, pipes escaped."""
    return " ".join(_CONTROL.sub(" ", str(text)).split()).replace("|", "\\|") or " "


def _row(*cells) -> str:
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def _code(text) -> str:
    text = str(text)
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


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
    out += ["| | |", "|---|---|"]
    out.append(_row("Suite version", report.suite_version))
    out.append(_row("Vectors digest", _code(report.vectors_digest)))
    out.append(_row("Protocol", report.protocol))
    out.append(_row("Target", _code(report.target)))
    out.append(_row("Profile", report.profile))
    if report.probe:
        out.append(_row("Probe", report.probe.get("summary") or "-"))
    out.append(_row("Environment", _environment(report.environment)))
    out.append("")

    out += ["| pass | acceptable | fail | error | xfail | skip | identity failures |",
            "|---:|---:|---:|---:|---:|---:|---:|"]
    out.append(_row(*(summary[k] for k in ("pass", "acceptable", "fail", "error", "xfail", "skip",
                                           "identity_failures"))))
    out.append("")
    if report.baseline:
        base = report.baseline
        out.append(f"Expected failures: {base['expected']} case(s) listed in {_code(base['file'])} failed "
                   f"as expected; {len(base['fixed'])} listed case(s) pass now"
                   + (f" ({', '.join(_code(f) for f in base['fixed'][:max_rows])})" if base["fixed"] else "")
                   + ".")
        out.append("")

    if bad_cases:
        out += [f"### Failing cases ({len(bad_cases)})", ""]
        out += ["| case | dtype | verdict | error / budget | max abs error | diagnoses |",
                "|---|---|---|---:|---:|---|"]
        for c in bad_cases[:max_rows]:
            diag = "; ".join(f"{code}: {msg}" for code, msg in zip(codes(c.diagnoses),
                                                                   messages(c.diagnoses)))
            out.append(_row(_code(c.id), c.dtype, c.verdict, fmt_float(c.budget_ratio),
                            fmt_float(c.max_abs_error), diag or "-"))
        if len(bad_cases) > max_rows:
            out.append("")
            out.append(f"…and {len(bad_cases) - max_rows} more (see the JSON report).")
        out.append("")
    else:
        graded = sum(summary[k] for k in ("pass", "acceptable"))
        out += [f"All {graded} graded cases are within their error budgets.", ""]

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
        out += [f"posref {report.suite_version} {c.id} [{c.dtype}]" for c in bad_cases[:max_rows]]
        out += ["```", ""]
        repro = next((c.repro for c in bad_cases if c.repro), "")
        if repro:
            # A repro is a posref command line, or Python when the adapter was a callable.
            language = "shell" if repro.startswith("posref ") else "python"
            out += ["<details><summary>Reproduce the first failure</summary>", "", f"```{language}",
                    repro.rstrip(), "```", "", "</details>", ""]

    if skipped:
        out += [f"<details><summary>Skipped cases ({len(skipped)})</summary>", ""]
        out += [f"- {_code(c.id)} [{c.dtype}]: {_cell(case_reason(c))}" for c in skipped[:max_rows]]
        if len(skipped) > max_rows:
            out.append(f"- …and {len(skipped) - max_rows} more")
        out += ["", "</details>", ""]
    return "\n".join(out)


def write(report, path) -> None:
    write_text_atomic(path, render(report))
