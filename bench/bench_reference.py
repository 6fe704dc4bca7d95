"""Benchmark: the float64 reference on each backend, fast and golden modes, and agreement between
backends at sizes the unit tests do not reach.

    python bench/bench_reference.py [--positions 4096] [--repeat 3] [--backends cpu,numpy,cuda]

For rope.cos_sin (positions x 64 pairs, base 5e5, positions up to 2**53) and rope.apply
([4, positions, 8, 128], half layout) it prints, per backend and mode, the best of --repeat runs
(after one warm-up that compiles the kernels), the values per second, and the ratio to the CPU
backend in the same mode, measured in this one run. Then it checks, on the whole arrays:
golden outputs of every backend identical bit for bit to the CPU's (all are correctly rounded),
and fast outputs within 2 ulp (cos/sin) and 8 ulp of max|x| (apply) of golden ones. Exit 1 if a
check fails. The cuda backend needs a GPU (or NUMBA_ENABLE_CUDASIM=1, far too slow for these
sizes); it is skipped with a note where there is none.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from reference import rope

MODES = ("fast", "golden")


def _best(fn, repeat):
    fn()  # warm-up: JIT compilation, frequency tables
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def _cuda_usable() -> bool:
    from numba import cuda

    return cuda.is_available()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--positions", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--backends", default="cpu,numpy,cuda")
    args = ap.parse_args(argv)
    backends = args.backends.split(",")
    if "cuda" in backends and not _cuda_usable():
        print("cuda: no GPU here, skipped")
        backends.remove("cuda")

    rng = np.random.default_rng(0)
    n = args.positions
    pos = rng.integers(-(2**53), 2**53, size=(1, n))
    pos[0, : n // 2] = np.arange(n // 2)  # a prefill's positions, and huge ones
    x = rng.standard_normal((4, n, 8, 128))
    apos = np.broadcast_to(pos, (4, n)).copy()
    jobs = {
        "cos_sin": (lambda b, m: np.stack(rope.cos_sin(pos, 128, 5e5, backend=b, mode=m)), 2 * n * 64),
        "apply": (lambda b, m: rope.apply(x, apos, base=5e5, backend=b, mode=m), x.size),
    }
    failures = 0
    for name, (fn, values) in jobs.items():
        outs, secs = {}, {}
        for mode in MODES:
            for b in backends:
                secs[b, mode], outs[b, mode] = _best(lambda: fn(b, mode), args.repeat)
        print(f"\n{name}: {values:,} values")
        print(f"  {'backend':8} {'mode':7} {'best s':>9} {'Mvalues/s':>10} {'x cpu':>7}")
        for mode in MODES:
            for b in backends:
                t = secs[b, mode]
                print(f"  {b:8} {mode:7} {t:9.4f} {values / t / 1e6:10.2f} {secs['cpu', mode] / t:7.2f}")
        golden = outs["cpu", "golden"]
        for b in backends:
            same = np.array_equal(outs[b, "golden"], golden)
            if name == "cos_sin":
                err = np.abs(outs[b, "fast"] - golden) / np.spacing(np.abs(golden))
                ok, what = err.max() <= 2, f"fast max {err.max():.2f} ulp"
            else:
                err = np.abs(outs[b, "fast"] - golden).max() / (2.0**-52 * np.abs(x).max())
                ok, what = err <= 8, f"fast max {err:.2f} ulp of max|x|"
            print(f"  {b}: golden {'identical to cpu' if same else 'DIFFERS from cpu'}; {what}"
                  f"{'' if ok else ' (over the bound)'}")
            failures += (not same) + (not ok)
    print(f"\n{'all checks passed' if not failures else f'{failures} check(s) failed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
