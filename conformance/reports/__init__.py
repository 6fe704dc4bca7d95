"""Report writers for a graded run (conformance.results.Report).

    terminal.TerminalReporter   progress bar while grading, then the table and a summary line
    json_report.write           --json FILE, validated against conformance/schemas/report.schema.json
    junit.write                 --junit FILE (JUnit XML)
    markdown.write              --markdown FILE (a summary to paste into a review)
    plot.write                  --plot FILE.png (error and budget against position)

Writers import their heavy dependencies (rich, jsonschema, matplotlib) only when called.
"""

from __future__ import annotations

from conformance.reports._common import citation, summary_line

WRITERS = {
    "json": "conformance.reports.json_report",
    "junit": "conformance.reports.junit",
    "markdown": "conformance.reports.markdown",
    "plot": "conformance.reports.plot",
}


def write_reports(report, **paths) -> list:
    """Write every report whose path is given, e.g. write_reports(r, json="r.json", plot=None).

    Returns the paths written. Unknown keywords raise ValueError naming them.
    """
    import importlib

    unknown = sorted(set(paths) - set(WRITERS))
    if unknown:
        raise ValueError(f"unknown report kind(s) {unknown}; expected some of {sorted(WRITERS)}")
    written = []
    for kind, path in paths.items():
        if path is None:
            continue
        importlib.import_module(WRITERS[kind]).write(report, path)
        written.append(path)
    return written


__all__ = ["WRITERS", "citation", "summary_line", "write_reports"]
