"""``posref study TARGET --out DIR``: the long-context precision study of a rope.apply adapter.

Runs conformance.rope.study on the adapter (positions 0 to --max-position, each dtype, with and
without Llama 3.1 scaling), writes DIR/<configuration>.png (error against position), DIR/study.md
(the table of first unusable positions) and DIR/study.json, and prints the table. Exit 0 when the
study ran (whatever the implementation's precision), 2 on a usage or target error.
"""

from __future__ import annotations

HELP = "plot a rope.apply implementation's error against position (long-context precision study)"


def add_parser(subparsers) -> None:
    from conformance.rope.study import CONFIGS, DTYPES

    p = subparsers.add_parser("study", help=HELP, description=HELP + ".")
    p.add_argument("target", metavar="TARGET", help="a rope.apply adapter: package.module:name or file.py:name")
    p.add_argument("--out", metavar="DIR", required=True, help="folder for the PNG plots, study.md and study.json")
    p.add_argument("--dtype", dest="dtypes", action="append", choices=DTYPES,
                   help=f"dtype to study; repeat for several (default: {', '.join(DTYPES)})")
    p.add_argument("--config", dest="configs", action="append", choices=tuple(CONFIGS),
                   help="configuration; repeat for several (default: all)")
    p.add_argument("--layout", default="half", choices=("half", "interleaved"), help="the pair layout (default half)")
    p.add_argument("--max-position", type=int, default=2**20, metavar="N", help="largest position (default 2^20)")
    p.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS", help="per-call limit (default 120 s)")
    p.set_defaults(func=run)


def run(args) -> int:
    import json
    from dataclasses import asdict
    from pathlib import Path

    from conformance.errors import UsageError
    from conformance.isolation import check_timeout, make_invoker
    from conformance.loader import load_target
    from conformance.reports._common import write_text_atomic
    from conformance.rope import study

    if not 1 <= args.max_position <= 2**53 - 1:
        raise UsageError(f"--max-position must be from 1 to 2**53 - 1, got {args.max_position}")
    try:
        timeout = check_timeout(args.timeout)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    out = Path(args.out).expanduser().absolute()
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out: {args.out} is not a directory")
    fn = load_target(args.target)
    invoker = make_invoker(fn, args.target, isolate=False, timeout=timeout)
    try:
        results = study.run_study(invoker, layout=args.layout, dtypes=tuple(args.dtypes or study.DTYPES),
                                  configs=tuple(args.configs or study.CONFIGS), max_position=args.max_position)
    finally:
        invoker.close()
    table = study.summary_table(results)
    try:
        for config in dict.fromkeys(s.config for s in results if s.error):  # a config nothing ran on: no plot
            write_text_atomic(out / f"{config}.png", study.render(results, config, args.target))
        write_text_atomic(out / "study.md", "\n".join([f"# posref study of `{args.target}`", ""] + table) + "\n")
        write_text_atomic(out / "study.json", json.dumps([asdict(s) for s in results], indent=1) + "\n")
    except (OSError, ValueError) as exc:  # a link, FIFO or device planted in --out: refused, one line
        raise UsageError(f"--out: cannot write the study: {exc}") from None
    print("\n".join(table))
    print(f"wrote {out}/study.md, study.json and one PNG per configuration that ran")
    return 0
