"""``posref models [--json]`` and ``posref models show NAME``: the zoo of real models' positional
configurations (reference.zoo, issue 27).

``posref models`` lists every record: its name, its key parameters in one short column (family,
base, scaling, head and rotary dims, heads / kv heads, context: reference.zoo.summary) and where
its values were read, wrapped to the terminal width like ``posref identities``. ``--json``
prints the list as JSON (name, family, summary, source) instead. ``posref models show NAME``
prints the whole record as JSON. An unknown NAME is a usage error (one line, exit 2) with a
did-you-mean. Never imports torch.
"""

from __future__ import annotations

import json
import os

from conformance.errors import UsageError, did_you_mean


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "models",
        help="list the zoo of real models' positional configurations",
        description="List the zoo: one record per real model (family, key parameters, the file "
        "its values were read from). `posref models show NAME` prints one record as JSON.",
    )
    parser.add_argument("--json", action="store_true", dest="as_json",
                        help="print the list as JSON (name, family, summary, source)")
    sub = parser.add_subparsers(dest="models_command", metavar="{show}")
    show = sub.add_parser("show", help="print one model's record as JSON",
                          description="Print the zoo record NAME (its source and its positional "
                          "fields, verbatim) as JSON.")
    show.add_argument("name", metavar="NAME", help="a model name, as `posref models` lists them")
    parser.set_defaults(func=run)
    return parser


def run(args) -> int:
    from reference import zoo

    if getattr(args, "models_command", None) == "show":
        print(json.dumps(_load(zoo, args.name), indent=2, ensure_ascii=False))
        return 0
    records = zoo.records()
    if args.as_json:
        print(json.dumps(to_json(zoo, records), indent=2, ensure_ascii=False))
        return 0
    print_list(zoo, records)
    return 0


def _load(zoo, name) -> dict:
    """The record, or a one-line usage error naming the closest name."""
    try:
        return zoo.load(name)
    except KeyError:
        raise UsageError(f"models: no model {name!r} in the zoo{did_you_mean(name, zoo.names())}; "
                         "`posref models` lists them") from None


def to_json(zoo, records) -> list:
    """The list document: name, family, summary and source of each record, in name order."""
    return [{"name": r["name"], "family": r["family"], "summary": zoo.summary(r), "source": r["source"]}
            for r in records]


def print_list(zoo, records, console=None) -> None:
    """One entry per model: "  name: summary" wrapped with a hanging indent, its source under it,
    then a closing line. Lines, not a table, for the reason ``posref identities`` gives."""
    from rich.console import Console
    from rich.text import Text

    from conformance.reports.terminal import _Lines

    if console is None:
        console = Console()
        if not console.is_terminal and "COLUMNS" not in os.environ:
            console = Console(width=160)  # logs and pipes: one line per model
    out = _Lines(max(int(console.width or 80), 40))
    out.add(f"posref models: {len(records)} real models' positional configurations", style="bold")
    out.blank()
    for r in records:
        extra = f" (also {', '.join(r['family'][1:])})" if len(r["family"]) > 1 else ""
        out.add(f"{r['name']}: {zoo.summary(r)}{extra}", indent=2)
        out.add(zoo.source_label(r), indent=6, style="dim")
    out.blank()
    out.add("`posref models show NAME` prints a record: its source and its positional fields, verbatim.")
    for text, style in out.lines:
        console.print(Text(text, style=style), no_wrap=True, overflow="ignore", crop=False)
