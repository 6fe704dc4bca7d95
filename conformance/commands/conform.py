"""``posref conform TARGET --protocol NAME ...``: grade an implementation on the golden vectors.

With no TARGET, every adapter of the project's table (posref.toml or [tool.posref] in
pyproject.toml, conformance.project) is graded in turn (conformance.commands.project).

Prints the progress bar and the terminal report (conformance.reports.terminal), writes the requested
reports, and returns the exit code: 0 everything graded passed, 1 some case or identity failed
or errored, 2 usage or target error (UsageError, one line), 3 golden vectors fail integrity.
"""

from __future__ import annotations

import sys

HELP = "grade a PyTorch implementation against the golden vectors"


DEFAULT_TIMEOUT_S = 120.0

EXIT_CODES = """exit codes:
  0  every graded case and check passed
  1  some case or identity check failed or errored, nothing was graded, or the adapter ended the
     grading process
  2  usage or target error (one line on stderr)
  3  the golden vectors fail their integrity check, or are not the ones this posref ships"""


def epilog() -> str:
    """The adapter signature of every protocol (from the registry), an example and the exit codes."""
    from conformance.core import registry

    lines = ["adapters (TARGET is file.py:function or package.module:function):"]
    lines += [f"  {name:<18} {registry.get(name).signature}" for name in registry.protocol_names()]
    lines += ["", "example:",
              "  posref conform examples/rope/hf_rotate_half.py:apply --protocol rope.apply --dtype bfloat16",
              "", EXIT_CODES]
    return "\n".join(lines)


def add_parser(subparsers) -> None:
    from conformance.core import registry
    from conformance.core.tolerance import DTYPES, PROFILES
    from conformance.guard import DEFAULT_MAX_TIME
    from conformance.runner import DEFAULT_DTYPES

    import argparse

    p = subparsers.add_parser("conform", help=HELP, description=HELP + ".", epilog=epilog(),
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", metavar="TARGET", nargs="?",
                   help="the adapter: package.module:name or path/to/file.py:name; without it, every adapter "
                        "listed in the project's posref.toml or [tool.posref] table (found from the current "
                        "folder upward) is graded, one summary line each, and the worst exit code is returned")
    p.add_argument("--protocol", metavar="NAME",
                   help=f"one of: {', '.join(registry.protocol_names())} (required with a TARGET)")
    p.add_argument("--model", metavar="NAME",
                   help="grade at this model's configuration (`posref models` lists them): its head size, "
                        "rotary fraction, layout, base, scaling, heads and context, on cases drawn for it from "
                        "the seed instead of the committed vectors")
    p.add_argument("--model-config", metavar="FILE",
                   help="the same from a Hugging Face config.json (rope_scaling or rope_parameters); a field "
                        "posref cannot read is a one-line error naming it")
    p.add_argument("--config", metavar="FILE",
                   help="with no TARGET: the posref.toml or pyproject.toml listing the adapters")
    p.add_argument("--adapter", dest="adapters", action="append", metavar="NAME",
                   help="with no TARGET: grade only this adapter of the table (repeat for several)")
    p.add_argument("--layout", default="auto", metavar="LAYOUT",
                   help="the layout the implementation uses, for protocols that have layouts (rope.apply: "
                        "half or interleaved); default auto: the protocol's probe detects it")
    p.add_argument(
        "--dtype",
        dest="dtypes",
        action="append",
        choices=DTYPES,
        help=f"dtype to grade in; repeat for several (default: {' and '.join(DEFAULT_DTYPES)})",
    )
    p.add_argument("--device", default="cpu", help="cpu or cuda (default: cpu)")
    p.add_argument("--profile", default="standard", choices=PROFILES, help="tolerance profile (default: standard)")
    p.add_argument("--cases", metavar="GLOB", help="only case ids matching this glob (comma-separated globs)")
    p.add_argument("--json", metavar="FILE", help="write the JSON report")
    p.add_argument("--junit", metavar="FILE", help="write JUnit XML")
    p.add_argument("--markdown", metavar="FILE", help="write a Markdown summary for a review")
    p.add_argument("--plot", metavar="FILE.png", help="plot error and budget against position")
    p.add_argument("--isolate", action="store_true", help="run the implementation in a child process")
    # A default limit, so that a hanging adapter becomes a `timeout` verdict instead of a hung CI
    # job; one RoPE call on the catalog's small tensors takes milliseconds.
    p.add_argument("--timeout", type=float, metavar="SECONDS", default=DEFAULT_TIMEOUT_S,
                   help=f"per-call time limit (default {DEFAULT_TIMEOUT_S:g} s)")
    p.add_argument("--max-time", type=float, metavar="SECONDS", default=DEFAULT_MAX_TIME,
                   help=f"time limit of the whole run; calls left are reported as not run (default "
                        f"{DEFAULT_MAX_TIME:g} s)")
    p.add_argument("--vectors-dir", metavar="DIR",
                   help="grade against another vectors directory (its digest is noted in every report)")
    p.add_argument("--keep-going", action="store_true",
                   help="keep calling the adapter after two calls in a row timed out (default: the "
                        "remaining calls are reported as not run)")
    p.add_argument("--seed", type=_seed, metavar="N",
                   help="seed of the fresh cases drawn at run time (default: a new one, printed)")
    p.add_argument("--no-fresh", dest="fresh", action="store_false",
                   help="grade only the committed vectors, no fresh cases")
    p.add_argument("--shapes", choices=("sample", "full"), default="sample",
                   help="fresh cases of the serving shape matrix (rope.apply: batched decode, tile-boundary "
                        "lengths, head counts, long prefill, tensor layouts): one of each kind (sample, "
                        "default) or all of them (full)")
    trainable = [n for n in registry.protocol_names() if getattr(registry.get(n), "differentiable", False)]
    p.add_argument("--grad", action="store_true",
                   help="also grade the backward pass: each differentiable input's gradient (autograd with a "
                        "cotangent drawn from the case) against the float64 reference backward, plus "
                        f"torch.autograd.gradcheck in float64 (protocols: {', '.join(trainable)})")
    p.add_argument("--autocast", choices=("bfloat16", "float16"), metavar="DTYPE",
                   help="run the implementation inside torch.autocast(device, DTYPE) (bfloat16 or float16); an "
                        "output arriving in DTYPE is graded with DTYPE's budget; --dtype stays the input dtype")
    p.add_argument("--compile", action="store_true",
                   help="also grade every case with the adapter wrapped by torch.compile (dynamic=None), each as "
                        "its own result marked compiled; a case correct eagerly and wrong compiled is diagnosed "
                        "compile-fault. Where torch.compile cannot run here, a note says why and the eager half "
                        "is graded as usual")
    p.add_argument("--compile-backend", default="inductor", metavar="NAME",
                   help="torch.compile's backend under --compile (default inductor; aot_eager or eager to tell "
                        "a fault of dynamo's tracing from one of inductor's code)")
    p.add_argument("--triton-interpret", action="store_true",
                   help="run Triton kernels in Triton's interpreter on CPU tensors: TRITON_INTERPRET=1 is set "
                        "before TARGET is imported (and in --isolate's child); large cases are sampled (one of "
                        "each kind over 2^20 input elements; --shapes full grades them all). Needs triton")
    p.add_argument("--framework", choices=("torch", "numpy", "jax", "mlx", "cupy"), default="torch",
                   help="the array library the adapter takes and returns (default torch): its inputs arrive as "
                        "that library's arrays (DLPack where possible) and its outputs are converted back; "
                        "budgets and reports are the same (docs/frameworks.md). --grad works with jax (jax.vjp)")
    debug = p.add_mutually_exclusive_group()
    debug.add_argument("--pdb", dest="debug", action="store_const", const="pdb", default=None,
                       help="on the first exception the adapter raises, open pdb's post-mortem in its "
                            "frame, then go on (in-process only: not with --isolate)")
    debug.add_argument("--raise", dest="debug", action="store_const", const="raise",
                       help="re-raise the first exception the adapter raises, with its own traceback "
                            "(in-process only: not with --isolate)")
    p.add_argument("--expected-failures", metavar="FILE",
                   help="a baseline of known failures, one per line: '<case id> [<dtype>]' (globs allowed), "
                        "a fresh kind ('rope.apply/fresh/shape-dim-* [float32]') or 'identity:<protocol>/<id> "
                        "[<dtype>]': they are reported as xfail and do not fail the run; a new failure does, and "
                        "listed cases that pass now are reported as fixed")
    p.add_argument("--write-expected-failures", metavar="FILE",
                   help="write this run's failing cases, the kinds of its failing fresh cases and its failing "
                        "identities as such a baseline (the next run, from another seed, stays green)")
    loud = p.add_mutually_exclusive_group()
    loud.add_argument("-v", "--verbose", dest="verbosity", action="store_const", const=1, default=0,
                      help="list every case and identity, not only the failing ones")
    loud.add_argument("-q", "--quiet", dest="verbosity", action="store_const", const=-1,
                      help="print the summary line only")
    p.set_defaults(func=run)


def _seed(text: str) -> int:
    from reference.golden.fresh import MAX_SEED

    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= MAX_SEED:
        import argparse

        raise argparse.ArgumentTypeError(f"an integer from 0 to {MAX_SEED}, got {text!r}")
    return value


def options_from_args(args):
    """The runner's Options from parsed ``posref conform`` arguments."""
    from conformance.runner import DEFAULT_DTYPES, Options

    return Options(
        protocol=args.protocol,
        layout=args.layout,
        dtypes=tuple(args.dtypes or DEFAULT_DTYPES),
        device=args.device,
        profile=args.profile,
        cases=args.cases,
        isolate=args.isolate,
        timeout=args.timeout,
        max_time=args.max_time,
        keep_going=args.keep_going,
        vectors_dir=args.vectors_dir,
        fresh=args.fresh,
        seed=args.seed,
        expected_failures=args.expected_failures,
        shapes=args.shapes,
        grad=args.grad,
        autocast=args.autocast,
        debug=args.debug,
        model=args.model,
        model_config=args.model_config,
        compile=args.compile,
        compile_backend=args.compile_backend,
        triton_interpret=bool(getattr(args, "triton_interpret", False)),
        framework=getattr(args, "framework", "torch") or "torch",
    )


def run(args) -> int:
    from conformance.core import registry
    from conformance.errors import UsageError
    from conformance.loader import load_target
    from conformance.reports.terminal import TerminalReporter
    from conformance.runner import IntegrityError, exit_code
    from conformance.runner import run as run_grading

    if args.target is None:
        from conformance.commands import project

        return project.run(args)
    if args.config or args.adapters:
        option = "--config" if args.config else "--adapter"
        raise UsageError(f"{option} chooses adapters from the project's table: give it without a TARGET")
    if not args.protocol:
        raise UsageError("the following arguments are required with a TARGET: --protocol")
    opts = options_from_args(args)
    registry.get(opts.protocol)  # unknown protocol: exit 2 before loading anything
    _check_vectors_dir(args)
    check_report_paths(args)  # a report that cannot be written: exit 2 before a long run
    _tell_supervisor(args, opts)
    if opts.triton_interpret:
        from conformance import triton_interpret

        triton_interpret.require()  # before TARGET (and its kernels) is imported
    fn = None if args.isolate else load_target(args.target)
    # A report written to stdout (--json -) keeps stdout to itself: the terminal report goes to stderr.
    from conformance.reports.terminal import default_console

    progress_console = None
    if args.debug == "pdb":  # pdb's prompt has the terminal: no live progress bar redrawn over it
        from rich.console import Console

        progress_console = Console(stderr=True, force_terminal=False)
    reporter = TerminalReporter(default_console(stderr=True) if args.json == "-" else None,
                                progress_console=progress_console, verbosity=args.verbosity)
    try:
        report = run_grading(fn, opts, target=args.target, progress=_watched(reporter))
    except IntegrityError as exc:
        reporter.close()
        print(f"posref: error: {exc}", file=sys.stderr)
        return 3
    except UsageError:
        reporter.close()
        raise
    write_outputs(args, report)
    return exit_code(report)


def write_outputs(args, report) -> None:
    """The reports and the baseline the arguments ask for (UsageError when one cannot be written)."""
    from conformance.errors import UsageError
    from conformance.reports import write_reports

    try:
        write_reports(report, json=args.json, junit=args.junit, markdown=args.markdown, plot=args.plot)
        if args.write_expected_failures:
            from conformance.baseline import render
            from conformance.reports._common import write_text_atomic

            write_text_atomic(args.write_expected_failures, render(report))
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot write a report: {exc}") from None


def _tell_supervisor(args, opts) -> None:
    """Under the ``posref`` command (conformance.supervise): the run's limits and report paths, so
    that the supervisor can end the run and write the reports itself if the adapter holds this
    process."""
    from conformance.supervise import emit

    # Under --pdb the run waits on the person at the prompt: the supervisor's clock must not end it
    # (the grading process's own --max-time leaves the time in pdb out, runner._debug).
    max_time = None if opts.debug == "pdb" else opts.max_time
    emit({"ev": "start", "timeout": opts.timeout, "max_time": max_time, "isolate": bool(opts.isolate),
          "json": args.json, "junit": args.junit, "markdown": args.markdown, "plot": args.plot,
          "write_expected_failures": args.write_expected_failures,
          "expected_failures": args.expected_failures, "verbosity": args.verbosity})


def _watched(reporter):
    """The progress reporter, telling the supervisor of each planned and finished case."""
    from conformance.supervise import Progress, supervised

    return Progress(reporter) if supervised() else reporter


def check_report_paths(args) -> None:
    """UsageError naming the option when a report path is empty, not a regular file or a new
    path (a directory, a symlink, a device, a FIFO), lies under a file, would replace what is
    graded (a file in the vectors directory in use, the target's own source), or (for --plot)
    does not name a PNG. Makes the paths absolute."""
    from pathlib import Path

    from conformance.errors import UsageError
    from conformance.loader import target_files
    from conformance.reports._common import check_report_path
    from reference.golden import store

    vectors = args.vectors_dir if args.vectors_dir is not None else store.vectors_dir()
    sources = target_files(args.target)
    for flag in ("json", "junit", "markdown", "plot", "write_expected_failures"):
        path = getattr(args, flag, None)
        if path is None or (flag == "json" and path == "-"):
            continue
        option = f"--{flag.replace('_', '-')}"
        setattr(args, flag, check_report_path(option, path, protected_dirs=[vectors], protected_files=sources))
        if flag == "plot" and Path(path).suffix.lower() != ".png":
            raise UsageError(f"--plot: {path}: the plot is a PNG image; name the file *.png")


def _check_vectors_dir(args) -> None:
    """--vectors-dir must name an existing directory: a usage error (exit 2) before grading, not
    an integrity failure (exit 3) of vectors that are not there."""
    import os

    from conformance.errors import UsageError

    if args.vectors_dir is None:
        return
    if args.vectors_dir == "" or "\x00" in args.vectors_dir or not os.path.isdir(args.vectors_dir):
        raise UsageError(f"--vectors-dir: {args.vectors_dir!r} is not a directory")
