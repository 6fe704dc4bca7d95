"""Benchmark: grade one rope.apply implementation on the whole RoPE catalog in four dtypes.

    python bench/bench_conform.py [--target bench/rope_styles.py:spec_following] [--repeat 3]
                                  [--isolate] [--cli]

Target (issue 4, "Speed"): under 30 s on the 2-core machines. The default implementation follows
spec.layout (HF rotate_half for half cases, GPT-J rotate_every_two for interleaved ones), so every
golden rope.apply case is graded in float64, float32, float16 and bfloat16, with the layout probe,
the diagnosis of failures (none here) and the black-box identity checks per dtype, as
``posref conform`` does. ``--cli`` times the whole command in a fresh process instead (Python
start-up and the torch import included). Prints the times and the ratio to the 30 s target.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TARGET_S = 30.0
DTYPES = ("float64", "float32", "float16", "bfloat16")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default=os.path.join(HERE, "rope_styles.py") + ":spec_following")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--isolate", action="store_true", help="run the implementation in a child process")
    ap.add_argument("--cli", action="store_true", help="time `posref conform` end to end in a new process")
    args = ap.parse_args(argv)

    if args.cli:
        cmd = [sys.executable, "-m", "conformance.cli", "conform", args.target, "--protocol", "rope.apply"]
        for d in DTYPES:
            cmd += ["--dtype", d]
        if args.isolate:
            cmd.append("--isolate")
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
            times.append(time.perf_counter() - t0)
            if proc.returncode not in (0, 1):
                print(proc.stderr, file=sys.stderr)
                return proc.returncode
        summary = proc.stdout.strip().splitlines()[-1]
    else:
        t0 = time.perf_counter()
        import torch  # noqa: F401 - counted separately: every run pays it once

        from conformance.api import run_conformance
        from reference.golden import store

        import_s = time.perf_counter() - t0
        print(f"imports (torch, posref): {import_s:.2f} s")
        n_cases = sum(1 for _ in store.iter_cases("rope.apply"))
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            report = run_conformance(args.target, "rope.apply", dtypes=DTYPES, isolate=args.isolate)
            times.append(time.perf_counter() - t0)
        s = report.summary()
        summary = (
            f"{n_cases} cases x {len(DTYPES)} dtypes = {len(report.cases)} graded results, "
            f"{len(report.identities)} identity checks; "
            + ", ".join(f"{s[k]} {k}" for k in ("pass", "acceptable", "fail", "error", "skip"))
        )
    best = min(times)
    print(summary)
    print(f"torch threads: {__import__('torch').get_num_threads()}, cpu count: {os.cpu_count()}")
    print("times (s): " + ", ".join(f"{t:.2f}" for t in times))
    print(f"best {best:.2f} s = {best / TARGET_S:.3f} of the {TARGET_S:.0f} s target")
    return 0 if best < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
