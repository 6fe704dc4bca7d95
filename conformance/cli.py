"""The ``posref`` command line: a dispatcher over one module per subcommand.

Each command module exposes ``add_parser(subparsers)``, which registers its sub-parser and sets
``func`` to a callable ``(args) -> int`` (the exit code). Heavy imports (torch, numba kernels)
happen inside those callables so that ``posref --help`` stays fast.

Exit codes (docs/design.md): 0 passed, 1 some case or identity failed, 2 usage or target error,
3 golden vectors fail their integrity check.
"""

from __future__ import annotations

import argparse
import sys

from conformance.errors import UsageError

COMMAND_MODULES = (
    "conformance.commands.conform",
    "conformance.commands.vectors",
    "conformance.commands.identities",
    "conformance.commands.study",
    "conformance.commands.bench",
    "conformance.commands.models",
    "conformance.commands.survey",
)


class _Parser(argparse.ArgumentParser):
    """argparse exits with 2 on usage errors already; keep its message to one line."""

    def error(self, message):  # noqa: D401 - argparse API
        self.exit(2, f"posref: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    import importlib

    from reference import __version__

    from conformance.commands.conform import epilog

    parser = _Parser(prog="posref", description="Ground truth for Transformer positional encodings.",
                     epilog=epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"posref {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue  # a command not built yet
        module.add_parser(sub)
    return parser


def _tolerant_streams() -> None:
    """Escape what the terminal's encoding cannot show (an adapter's "\u2603" message on an ASCII
    or cp1252 console) instead of dying with UnicodeEncodeError halfway through the table."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError, OSError):  # replaced or detached streams: leave them
            pass


def main(argv=None) -> int:
    _tolerant_streams()
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    args.argv = argv  # what was written, for the options a project run passes on (commands.project)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except UsageError as exc:
        from conformance.isolation import printable

        # One line, whatever the message quotes (a path or a name with control characters).
        print(f"posref: error: {printable(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("posref: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # Output piped into `head` and closed early: not an error of ours. Point stdout at devnull
        # so the interpreter's final flush does not raise again.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    from conformance.supervise import entry

    sys.exit(entry())
