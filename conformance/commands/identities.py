"""``posref identities [--family NAME] [--json FILE]``: check the references' identities.

Prints each identity (id, verdict, residual, bound, then its statement wrapped under the id),
grouped by family, and a closing summary line. Exit code 1 when any identity is ``failing`` (one that should hold
does not, or one violated by design turned out to hold), else 0; an unknown family is a usage
error (exit 2). ``--json FILE`` writes a list of objects with keys id, family, statement,
residual, bound, verdict (and ``error`` for a check that raised); a residual that is NaN or
infinite is written as null. Never imports torch.
"""

from __future__ import annotations

import json
import math
import os

from conformance.errors import UsageError

_STYLES = {"holds": "green", "violated-by-design": "yellow", "failing": "bold red"}
_JSON_KEYS = ("id", "family", "statement", "residual", "bound", "verdict")


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "identities",
        help="check the mathematical identities of the float64 references",
        description="Evaluate every registered identity on the float64 reference and grade it: "
        "holds, violated-by-design or failing. Exit 1 if any is failing.",
    )
    parser.add_argument("--family", metavar="NAME", help="only this family (e.g. rope)")
    parser.add_argument("--json", metavar="FILE", dest="json_file",
                        help="also write the results as a JSON list to FILE")
    parser.set_defaults(func=run)
    return parser


def run(args) -> int:
    from reference import identities

    if args.json_file is not None:  # a path that cannot be written: exit 2 before the work
        from conformance.reports._common import check_report_path

        args.json_file = check_report_path("--json", args.json_file, parents=False)
    try:
        results = identities.run_identities(args.family)
    except ValueError as exc:  # an unknown --family (checks that raise are graded, not raised)
        raise UsageError(str(exc)) from None
    if args.json_file:
        write_json(results, args.json_file)
    print_table(results)
    return 1 if any(r["verdict"] == "failing" for r in results) else 0


def to_json(results) -> list:
    """The JSON document: the contract's six keys, plus ``error`` only where a check raised."""
    out = []
    for r in results:
        item = {key: r[key] for key in _JSON_KEYS}
        if not math.isfinite(item["residual"]):
            item["residual"] = None
        if r.get("error"):
            item["error"] = r["error"]
        out.append(item)
    return out


def write_json(results, path) -> None:
    """Write the JSON document through posref's checked writer (never through a link, a device
    or a FIFO; whole or not at all)."""
    from conformance.reports._common import write_text_atomic

    text = json.dumps(to_json(results), indent=2, allow_nan=False) + "\n"
    try:
        write_text_atomic(path, text, parents=False)
    except ValueError as exc:
        raise UsageError(f"--json: {exc}") from None
    except OSError as exc:
        raise UsageError(f"--json: cannot write {path}: {exc.strerror or exc}") from None


def _number(value: float) -> str:
    return "nan" if math.isnan(value) else f"{value:.3g}"


def print_table(results, console=None) -> None:
    """One entry per identity, grouped by family: "  id: verdict (residual R, bound B)" and the
    statement wrapped under it, then the summary line. Lines, not a table: at 80 columns a table
    squeezed the statement column to a few characters (issue 25); an id or a number is never
    broken across lines."""
    from rich.console import Console
    from rich.text import Text

    from conformance.reports.terminal import _Lines

    if console is None:
        console = Console()
        if not console.is_terminal and "COLUMNS" not in os.environ:
            console = Console(width=160)  # logs and pipes: keep each statement on one line
    out = _Lines(max(int(console.width or 80), 40))
    out.add("posref identities", style="bold")
    for i, r in enumerate(results):
        if i == 0 or results[i - 1]["family"] != r["family"]:
            out.blank()
        out.add(f"{r['id']}: {r['verdict']} (residual {_number(r['residual'])}, bound {_number(r['bound'])})",
                indent=2, style=_STYLES.get(r["verdict"], ""))
        statement = r["statement"] if not r.get("error") else f"{r['statement']} [error: {r['error']}]"
        out.add(statement, indent=6)
    out.blank()
    counts = {v: sum(r["verdict"] == v for r in results) for v in _STYLES}
    summary = (f"{len(results)} identities: {counts['holds']} hold, "
               f"{counts['violated-by-design']} violated by design, {counts['failing']} failing")
    out.add(summary, style="bold red" if counts["failing"] else "bold green")
    for text, style in out.lines:
        # Text, not str: statements hold brackets such as x[perm] that rich would read as markup.
        console.print(Text(text, style=style), no_wrap=True, overflow="ignore", crop=False)
