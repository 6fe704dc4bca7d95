"""``posref survey``: grade every bundled library adapter and write the compatibility matrix.

Discovers the adapter modules of the checkout's examples folder (conformance.survey.discover),
grades each declared (module, function, protocol) row in a supervised ``posref conform`` run of its
own with one fixed seed, two at a time (conformance.survey.grade), and writes the Markdown matrix
(stdout, or --out) and its JSON twin (--json) (conformance.survey.matrix). A measurement, like
``posref bench``: exit 0 when the survey ran, whatever the libraries' verdicts; 2 on a usage error
(one line); 130 when interrupted.
"""

from __future__ import annotations

import sys

HELP = "grade every bundled library adapter and write the compatibility matrix (docs/compatibility.md)"
DEFAULT_SEED = 1
DEFAULT_ROW_TIME = 300.0  # seconds one row's run may take (its --max-time)
DEFAULT_JOBS = 2  # rows graded at once: the 2-core CI machine's cores


def add_parser(subparsers) -> None:
    from conformance.commands.conform import _seed

    p = subparsers.add_parser("survey", help=HELP, description=HELP + ".")
    p.add_argument("--out", metavar="FILE", help="write the Markdown matrix here (default: stdout)")
    p.add_argument("--json", metavar="FILE", help="write the same as JSON (one record per row)")
    p.add_argument("--seed", type=_seed, default=DEFAULT_SEED, metavar="N",
                   help=f"seed of every row's fresh cases (default {DEFAULT_SEED}, printed in the matrix)")
    p.add_argument("--family", dest="families", action="append", metavar="F",
                   help="only the adapters of this family (repeat for several; default: all)")
    p.add_argument("--timeout", type=float, default=DEFAULT_ROW_TIME, metavar="SECONDS",
                   help=f"time limit of one row's run, its --max-time (default {DEFAULT_ROW_TIME:g} s)")
    p.add_argument("--jobs", type=int, default=DEFAULT_JOBS, metavar="N",
                   help=f"rows graded at once (default {DEFAULT_JOBS})")
    p.add_argument("--examples", metavar="DIR",
                   help="the folder of adapter modules (default: the examples folder of this checkout)")
    p.set_defaults(func=run)


def run(args) -> int:
    import datetime
    import math
    import shlex

    from conformance.errors import UsageError
    from conformance.reports._common import check_report_path, write_text_atomic
    from conformance.survey import discover, grade, matrix

    if not (math.isfinite(args.timeout) and args.timeout > 0):
        raise UsageError(f"--timeout must be a positive number of seconds, got {args.timeout:g}")
    if not 1 <= args.jobs <= 64:
        raise UsageError(f"--jobs must be from 1 to 64, got {args.jobs}")
    if args.families:
        from conformance.core import registry
        from conformance.errors import did_you_mean

        known = registry.families()
        for family in args.families:
            if family not in known:
                raise UsageError(f"--family: no family {family!r}{did_you_mean(family, known)} "
                                 f"(families: {', '.join(sorted(known))})")
    out = check_report_path("--out", args.out) if args.out else None
    json_path = check_report_path("--json", args.json) if args.json else None
    if out is not None and out == json_path:
        raise UsageError("--out and --json name the same file")
    rows = discover.discover(args.examples, args.families)
    say = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    say(f"posref survey: {len(rows)} row{'s' if len(rows) != 1 else ''} from {args.examples or discover.default_examples()}"
        f", seed {args.seed}, {args.jobs} at a time")
    try:
        cells = grade.grade_all(rows, args.seed, args.timeout, args.jobs, say)
    except KeyboardInterrupt:
        print("posref: interrupted: nothing written", file=sys.stderr)
        return 130
    head = matrix.header(cells, args.seed, _command(args, shlex), _now(datetime), _torch_version())
    doc = matrix.document(rows, cells, head)
    text = matrix.render(doc)
    try:
        if json_path is not None:
            write_text_atomic(json_path, matrix.to_json(doc))
        if out is not None:
            write_text_atomic(out, text)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot write the matrix: {exc}") from None
    if out is None:
        print(text, end="")
    tally = ", ".join(f"{n} {status}" for status, n in matrix.counts(doc).items())
    unexplained = sum(1 for rec in doc["rows"] if rec["explanation"] == matrix.UNEXPLAINED)
    say(f"posref survey: {len(rows)} rows: {tally}; {unexplained} deviation{'s' if unexplained != 1 else ''} "
        f"unexplained{'; wrote ' + ', '.join(str(p) for p in (out, json_path) if p) if out or json_path else ''}")
    return 0


def _command(args, shlex) -> str:
    """The command line that regenerates the document: as written, the seed made explicit."""
    argv = list(getattr(args, "argv", None) or ["survey"])
    if not any(a == "--seed" or a.startswith("--seed=") for a in argv):
        argv += ["--seed", str(args.seed)]
    return "posref " + shlex.join(argv)


def _now(datetime) -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _torch_version():
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None
