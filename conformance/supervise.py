"""Exit codes must not lie (issue 9): ``posref conform`` runs in a child process that the command
line's own process watches.

Without --isolate the adapter runs inside the grading process, where it can end that process
(``os._exit(0)``, a signal, a C extension's ``exit``) before any report is written; CI would read
exit 0 as a pass. So ``entry()`` (the ``posref`` command) runs ``conform`` in a child and waits:
the child reports its exit code through a pipe as its last act, and a child that ends without
reporting, or with another code than it reported, ended early. The command then says so and
exits 1. This detects an adapter that exits; it does not defend against one that deliberately
forges the report (in-process code can do anything the runner can: use --isolate, whose worker
process is the only one the adapter's code runs in). Other commands, and ``main()`` called from
Python, are not supervised.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

ENV = "POSREF_SUPERVISED_FD"


def _wants_supervision(argv) -> bool:
    return bool(argv) and argv[0] == "conform" and os.name == "posix" and ENV not in os.environ


def entry() -> int:
    from conformance.cli import main

    argv = sys.argv[1:]
    if ENV in os.environ:  # the supervised child: report the code as the very last thing
        fd = int(os.environ.pop(ENV))
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse (a usage error, --help): the adapter's are verdicts
            if exc.code is not None and not isinstance(exc.code, int):
                print(exc.code, file=sys.stderr)
            code = 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 1
        try:
            os.write(fd, str(code).encode())
        except OSError:
            pass
        return code
    if not _wants_supervision(argv):
        return main(argv)
    read_end, write_end = os.pipe()
    env = dict(os.environ, **{ENV: str(write_end)})
    proc = subprocess.Popen([sys.executable, "-m", "conformance.cli", *argv], env=env, pass_fds=(write_end,))
    os.close(write_end)
    # Ctrl-C reaches the child too (same process group); it stops the run and reports.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        status = proc.wait()
    finally:
        signal.signal(signal.SIGINT, previous)
    with os.fdopen(read_end, "rb") as pipe:
        token = pipe.read(32)
    if token == str(status).encode():
        return status
    how = f"exit status {status}" if status >= 0 else f"signal {-status}"
    print(f"posref: error: the run ended before it finished ({how}): the adapter ended the process "
          "(os._exit, a signal?), so verdicts and reports are missing or incomplete; grade such code "
          "with --isolate", file=sys.stderr)
    return 1
