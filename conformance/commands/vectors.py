"""``posref vectors``: regenerate, verify, list and show the golden vectors.

    posref vectors regenerate [--family F] [--backend cpu|cuda|numpy] [--out DIR]
    posref vectors verify [--dir DIR] [--rederive] [--certify] [--backend cpu|cuda|numpy]
    posref vectors list [--protocol P] [--json]
    posref vectors show CASE_ID
    posref vectors export CASE_ID [--format npz|pt|json] [--out FILE] [--seed N]  (commands/export.py)

Exit codes: 0 fine, 2 usage error (one line), 3 the vectors fail their integrity check (each
problem printed as ``<file>: <reason>``). Never imports torch (export --format pt aside).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import textwrap
import time
from pathlib import Path

from conformance.errors import UsageError, did_you_mean

BACKENDS = ("cpu", "cuda", "numpy")
EXIT_INTEGRITY = 3


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "vectors", help="regenerate, verify, list, show or export the golden vectors",
        description="Golden vectors: regenerate, verify, list, show, export.")
    sub = parser.add_subparsers(dest="vectors_command", metavar="ACTION",
                                parser_class=type(parser))
    parser.set_defaults(func=_missing_action(parser))

    regen = sub.add_parser("regenerate", help="rebuild vectors from the reference, with a manifest")
    regen.add_argument("--family", help="only these groups: a family (rope), a protocol "
                       "(rope.apply), a group (rope.apply/llama2-d128) or a group name")
    regen.add_argument("--backend", choices=BACKENDS, default="cpu",
                       help="reference backend computing the expected arrays (default cpu)")
    regen.add_argument("--out", type=_path, help="output directory (default: the vectors directory): a "
                       "new or empty one, or with --force another posref vectors directory")
    regen.add_argument("--force", action="store_true",
                       help="replace the vectors in an --out directory that already holds some")
    regen.set_defaults(func=run_regenerate)

    verify = sub.add_parser("verify", help="check manifest hashes, schema and arrays (exit 3 on a problem)")
    verify.add_argument("--dir", type=_path, help="vectors directory (default: the installed one)")
    verify.add_argument("--rederive", action="store_true",
                        help="also recompute every case with the reference and compare")
    verify.add_argument("--certify", action="store_true",
                        help="also re-check with mpmath that every expected value is rounded as promised "
                             "(correctly, or faithfully for reductions)")
    verify.add_argument("--backend", choices=BACKENDS, default="cpu",
                        help="reference backend for --rederive (default cpu)")
    verify.add_argument("--protocol", action="append", metavar="P",
                        help="re-derive and certify only this protocol's groups (repeatable; the hashes, schema "
                             "and arrays of every file are still checked)")
    verify.set_defaults(func=run_verify)

    lister = sub.add_parser("list", help="list case ids, flags and comments")
    lister.add_argument("--protocol", help="only cases of this protocol (e.g. rope.apply)")
    lister.add_argument("--json", action="store_true",
                        help="print a JSON list of {id, protocol, comment, flags}")
    lister.set_defaults(func=run_list)

    show = sub.add_parser("show", help="parameters, comment, flags and arrays of one case")
    show.add_argument("case_id", metavar="CASE_ID", help="e.g. rope.apply/llama2-d128/decode-4095")
    show.set_defaults(func=run_show)

    from conformance.commands import export

    export.add_parser(sub)


def _path(text: str) -> Path:
    """A path argument; '' is refused (Path('') would silently mean the current folder)."""
    if not text or "\x00" in text:
        import argparse

        raise argparse.ArgumentTypeError(f"{text!r} is not a path")
    return Path(text)


def _missing_action(parser):
    def run(args) -> int:
        parser.print_help(sys.stderr)
        return 2

    return run


def _use_cuda_simulator_without_gpu() -> None:
    """The cuda backend runs under numba's simulator where no NVIDIA driver is present; the
    variable must be set before numba.cuda is first imported."""
    if "numba.cuda" in sys.modules or "NUMBA_ENABLE_CUDASIM" in os.environ:
        return
    if not (Path("/dev/nvidiactl").exists() or shutil.which("nvidia-smi")):
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
        print("posref: no GPU found, running the cuda backend under NUMBA_ENABLE_CUDASIM=1 (slow)",
              file=sys.stderr)


def run_regenerate(args) -> int:
    from reference.golden import catalog, generate
    from reference.safe_files import FileRefused

    try:
        catalog.select(args.family)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out: {args.out} exists and is not a directory")
    if args.backend == "cuda":
        _use_cuda_simulator_without_gpu()
    try:
        generate.regenerate(args.out, family=args.family, backend=args.backend, force=args.force)
    except generate.TargetError as exc:
        raise UsageError(str(exc)) from None
    except FileRefused as exc:  # a link or FIFO planted while the vectors were being built
        raise UsageError(f"--out: {exc}") from None
    except OSError as exc:  # e.g. --out under a file, or a read-only vectors directory
        where = exc.filename or args.out or "the vectors directory"
        raise UsageError(f"--out: cannot write {where}: {exc.strerror or exc}") from None
    return 0


def run_verify(args) -> int:
    from reference.golden import store, verify

    if args.dir is not None and not args.dir.is_dir():
        raise UsageError(f"--dir: {args.dir} is not a directory")
    root = args.dir if args.dir is not None else store.vectors_dir()
    protocols = None
    if args.protocol:
        from reference.golden import catalog

        unknown = sorted(set(args.protocol) - set(catalog.protocols()))
        if unknown:
            raise UsageError(f"--protocol: no protocol {unknown[0]!r} in the vectors{did_you_mean(unknown[0], catalog.protocols())}")
        protocols = set(args.protocol)
    start = time.perf_counter()
    problems = verify.check(root)
    if not problems and args.rederive:
        if args.backend == "cuda":
            _use_cuda_simulator_without_gpu()
        problems = verify.rederive(root, backend=args.backend, protocols=protocols)
    certified = None
    if not problems and args.certify:
        problems, certified = verify.certify(root, protocols=protocols)
    if problems:
        for problem in problems:
            print(f"FAIL {problem}")
        print(f"posref vectors: {len(problems)} problem(s) in {root}", file=sys.stderr)
        return EXIT_INTEGRITY
    manifest = store.load_manifest(root)
    counts = manifest["number_of_cases"]
    what = "hashes, schema and arrays" + (f", re-derived with {args.backend}" if args.rederive else "")
    if protocols and (args.rederive or args.certify):
        what += f" ({', '.join(sorted(protocols))} only)"
    if certified is not None:
        what += ", " + _certification_summary(certified)
    print(f"OK {root}: {len(manifest['files'])} files, {sum(counts.values())} cases "
          f"({', '.join(f'{p} {n}' for p, n in counts.items())}); {what}; "
          f"suite {manifest['suite_version']}, digest {manifest['digest']} "
          f"({time.perf_counter() - start:.1f} s)")
    return 0


def _certification_summary(certificates) -> str:
    """"certified 123456 values: 0 not correctly rounded (max 0.5 ulp); faithful: none"."""
    total = sum(c.certified for c in certificates.values())
    worst = max((c.max_ulp for c in certificates.values()), default=0.0)
    faithful = sorted(k for k, c in certificates.items() if c.rounding == "faithful")
    return (f"certified {total} values against mpmath: 0 not rounded as promised (max {worst:.3g} ulp); "
            f"faithfully rounded groups: {', '.join(faithful) or 'none'}")


def _integrity_failure():
    """The exit code 3 message when the installed vectors fail their integrity check (as
    ``posref conform`` checks them), else None: list and show read only checked files."""
    from conformance.runner import IntegrityError, check_integrity

    try:
        check_integrity()
    except IntegrityError as exc:
        print(f"posref: error: {exc}", file=sys.stderr)
        return EXIT_INTEGRITY
    return None


def _load_cases(protocol=None):
    from reference.golden import store

    try:
        return list(store.iter_cases(protocol))
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from None


def run_list(args) -> int:
    from reference.golden import store

    failed = _integrity_failure()
    if failed:
        return failed
    cases = _load_cases(args.protocol)
    if args.protocol is not None and not cases:
        known = ", ".join(store.protocol_names())
        raise UsageError(f"--protocol: no cases for {args.protocol!r}; known: {known}")
    if args.json:
        rows = [{"id": c.id, "protocol": c.protocol, "comment": c.comment, "flags": c.flags}
                for c in cases]
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    width = max((len(c.id) for c in cases), default=2)
    for case in cases:
        print(f"{case.id:<{width}}  {','.join(case.flags)}")
    print(f"{len(cases)} cases", file=sys.stderr)
    return 0


def _preview(array, limit=8) -> str:
    import numpy as np

    flat = np.asarray(array).reshape(-1)
    head = np.array2string(flat[:limit], precision=17, separator=", ", max_line_width=10**6)
    return head if flat.size <= limit else head[:-1] + f", ... ({flat.size} values)]"


def run_show(args) -> int:
    from reference.golden import store

    failed = _integrity_failure()
    if failed:
        return failed
    try:
        case = store.get_case(args.case_id)
    except KeyError:
        from conformance.errors import did_you_mean

        hint = did_you_mean(args.case_id, [c.id for c in _load_cases()])
        raise UsageError(f"unknown case id {args.case_id!r}{hint} (see: posref vectors list)") from None
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from None
    except (ValueError, TypeError, RecursionError, OSError) as exc:  # a listed file changed since the check
        from conformance.isolation import error_line

        print(f"posref: error: the golden vectors fail their integrity check: {args.case_id!r}: "
              f"{error_line(exc)}", file=sys.stderr)
        return EXIT_INTEGRITY
    print(f"{case.id}   (posref suite {store.SUITE_VERSION})")
    print(f"protocol: {case.protocol}")
    print("params:   " + ", ".join(f"{k}={v!r}" for k, v in case.params.items()))
    print("flags:    " + ", ".join(case.flags))
    print("comment:  " + textwrap.fill(case.comment, width=96, subsequent_indent=" " * 10))
    print("arrays:")
    for role, array in case.arrays.items():
        print(f"  {role:<16} {array.dtype} {list(array.shape)}  {_preview(array)}")
    return 0
