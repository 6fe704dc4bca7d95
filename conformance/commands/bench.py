"""``posref bench``: the reference's speed next to torch eager and a memory copy, in one table.

    posref bench [--repeat N] [--json FILE] [--skip-slow] [--backends cpu,numpy,cuda] [--full]
                 [--families yes|no|only]
    python bench/run.py [same options]

Three workloads (float64, rotary_dim 128, base 10000, half layout):

- prefill: rope.apply on x [1, 4096, 32, 128], positions 0..4095;
- decode: rope.apply on x [64, 1, 32, 128], one token per sequence at scattered positions (drawn
  uniformly from [0, 2**20): 64 sequences of a 1M-token context);
- cache: rope.cos_sin for 2**20 positions (0..2**20-1) x 64 pairs, cos and sin float64.

Rows: the memory copy of the same bytes (numpy ``x.copy()``; for the cache, a copy of as many
bytes as cos and sin together), posref's backends in fast and golden mode (cpu; numpy, whose
cache column needs ``--full``; cuda where a GPU is present), torch eager in float64 and float32
computing cos/sin from inv_freq and applying them HF-style (``x*cos + rotate_half(x)*sin``), and
for the cache a plain Numba ``cos(m*theta)``, ``sin(m*theta)`` loop (parallel, inaccurate for
large m: the speed an accurate table is measured against). Every cell is the best of --repeat
runs after a warm-up, the rows interleaved (each repetition runs every row once), so that the
ratios compare runs made under the same load; torch has run in the process before any posref
row is timed, as in a user's process. Ratios are to the copy of the same column.

Then (unless --families no) a second table, conformance/commands/bench_families.py: one row per
family (sinusoidal, Gaussian RoPE, xPos, 2-D RoPE, M-RoPE, ALiBi, KERPLE, FIRE, T5), its cpu fast
reference at a prefill-like workload against a memory copy of the same output bytes and its
golden mode, and the attention layer against torch eager float64 SDPA (--families only: this
table alone).

Then, unless --skip-slow: the wall time of ``posref vectors regenerate`` (whole catalog, into a
temporary directory, mpmath certification included) and of ``posref conform`` grading
bench/rope_styles.py:spec_following on the rope.apply catalog in four dtypes, each in a new
process. The targets of issue 13 are checked and printed; --json FILE writes everything (the
machine, the versions and the date included). Exit 0 (the table is a measurement, not a test).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

DEFAULT_JSON = "posref-bench.json"
COLUMNS = ("prefill", "decode", "cache")
SHAPES = {
    "prefill": "apply [1, 4096, 32, 128]",
    "decode": "apply [64, 1, 32, 128]",
    "cache": "cos_sin 2**20 x 64",
}
CACHE_POSITIONS = 2**20
ROTARY_DIM = 128
BASE = 10000.0
TARGETS = {
    "prefill_vs_copy": 1.3,
    "decode_vs_copy_slack_us": 50.0,
    "decode_vs_copy": 3.0,
    "golden_vs_fast": 3.0,
    "regenerate_s": 60.0,
    "conform_s": 30.0,
}


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "bench", help="time the reference against torch eager and a memory copy (one table)",
        description="Time posref's reference (fast and golden) against torch eager and a memory "
        "copy on a prefill, a decode step and a 2**20-position cos/sin cache; one table, rows "
        "interleaved, best of --repeat. Also times vectors regenerate and conform (--skip-slow).")
    add_arguments(parser)
    parser.set_defaults(func=run)
    return parser


def add_arguments(parser) -> None:
    parser.add_argument("--repeat", type=int, default=5, help="repetitions per cell, best kept (default 5)")
    parser.add_argument("--json", metavar="FILE", dest="json_file", default=DEFAULT_JSON,
                        help=f"write the results here (default {DEFAULT_JSON}; '-' for none)")
    parser.add_argument("--skip-slow", action="store_true",
                        help="skip the regenerate and conform timings")
    parser.add_argument("--backends", default="cpu,numpy,cuda",
                        help="posref backends to time (default cpu,numpy,cuda; cuda only with a GPU)")
    parser.add_argument("--full", action="store_true",
                        help="also time the numpy backend on the 2**20-position cache (tens of seconds)")
    parser.add_argument("--cache-positions", type=int, default=CACHE_POSITIONS,
                        help="positions of the cos/sin cache workload (default 2**20)")
    parser.add_argument("--families", choices=("yes", "no", "only"), default="yes",
                        help="the families table (every family's cpu reference against a copy, attention "
                        "against torch SDPA; about a minute): yes (default), no, or only (no RoPE table)")


def run(args) -> int:
    from conformance.errors import UsageError

    if args.repeat < 1:
        raise UsageError("--repeat: must be >= 1")
    if args.cache_positions < 1:
        raise UsageError("--cache-positions: must be >= 1")
    backends = [b for b in args.backends.split(",") if b]
    for b in backends:
        if b not in ("cpu", "numpy", "cuda"):
            raise UsageError(f"--backends: unknown backend {b!r} (cpu, numpy, cuda)")
    if args.json_file and args.json_file != "-":  # checked before minutes of timing
        from conformance.reports._common import check_report_path

        args.json_file = check_report_path("--json", args.json_file, parents=False)
    elif args.json_file == "":
        raise UsageError("--json: '' is not a file name ('-' for none)")
    families = getattr(args, "families", "yes")
    if families == "only":
        result = {"repeat": args.repeat, "notes": []}
    else:
        result = measure(repeat=args.repeat, backends=backends, full=args.full,
                         cache_positions=args.cache_positions)
    if families != "no":
        from . import bench_families

        result["families"] = bench_families.measure(repeat=args.repeat)
        result.setdefault("machine", machine())
    if not args.skip_slow:
        result["slow"] = measure_slow()
    result["targets"] = check_targets(result)
    if "families" in result:
        result["targets"] += bench_families.check_targets(result["families"])
    print(render(result))
    if args.json_file and args.json_file != "-":
        from conformance.reports._common import write_text_atomic

        try:
            write_text_atomic(args.json_file, json.dumps(result, indent=2, sort_keys=True) + "\n",
                              parents=False)
        except ValueError as exc:
            raise UsageError(f"--json: {exc}") from None
        except OSError as exc:
            raise UsageError(f"--json: cannot write {args.json_file}: {exc.strerror or exc}") from None
        print(f"\nwritten: {args.json_file}")
    return 0


# ---- the workloads ------------------------------------------------------------------------------


def _workloads(cache_positions):
    import numpy as np

    rng = np.random.default_rng(13)
    xp = rng.standard_normal((1, 4096, 32, 128))
    pp = np.arange(4096, dtype=np.int64)[None, :]
    xd = rng.standard_normal((64, 1, 32, 128))
    pd = rng.integers(0, 2**20, size=(64, 1), dtype=np.int64)
    pc = np.arange(cache_positions, dtype=np.int64)
    cache_bytes = np.zeros((2, cache_positions, ROTARY_DIM // 2))
    return {"prefill": (xp, pp), "decode": (xd, pd), "cache": (pc, cache_bytes)}


def _rows(work, backends, full):
    """[(row name, {column: zero-argument callable})], in table order."""
    import numpy as np

    from reference import rope

    rows = [("memory copy (numpy)", {
        "prefill": lambda: work["prefill"][0].copy(),
        "decode": lambda: work["decode"][0].copy(),
        "cache": lambda: work["cache"][1].copy(),
    })]
    for backend in backends:
        for mode in ("fast", "golden"):
            cells = {}
            for col in ("prefill", "decode"):
                x, pos = work[col]
                cells[col] = (lambda x=x, pos=pos, b=backend, m=mode:
                              rope.apply(x, pos, rotary_dim=ROTARY_DIM, base=BASE, backend=b, mode=m))
            if backend != "numpy" or full:
                pc = work["cache"][0]
                cells["cache"] = lambda b=backend, m=mode, pc=pc: rope.cos_sin(pc, ROTARY_DIM, BASE, backend=b, mode=m)
            rows.append((f"posref {backend} {mode}", cells))
    for dtype_name in ("float64", "float32"):
        rows.append((f"torch eager {dtype_name} (HF rotate_half)", _torch_cells(work, dtype_name)))
    naive = _naive_numba()
    theta = 1.0 / BASE ** (np.arange(0, ROTARY_DIM, 2, dtype=np.float64) / ROTARY_DIM)
    pc = work["cache"][0]

    def plain():
        c = np.empty((pc.shape[0], theta.shape[0]))
        s = np.empty_like(c)
        naive(pc, theta, c, s)
        return c, s

    rows.append(("numba cos(m*theta), sin(m*theta) (inaccurate)", {"cache": plain}))
    return rows


def _torch_cells(work, dtype_name):
    import torch

    dtype = getattr(torch, dtype_name)

    def inv_freq():
        return 1.0 / (BASE ** (torch.arange(0, ROTARY_DIM, 2, dtype=torch.int64).to(dtype) / ROTARY_DIM))

    def rotate_half(x):
        h = x.shape[-1] // 2
        return torch.cat((-x[..., h:], x[..., :h]), dim=-1)

    def apply(x, pos):
        freqs = pos[..., None].to(dtype) * inv_freq()  # [b, s, r/2]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos()[:, :, None, :]
        sin = emb.sin()[:, :, None, :]
        return x * cos + rotate_half(x) * sin

    cells = {}
    for col in ("prefill", "decode"):
        x, pos = work[col]
        tx = torch.from_numpy(x).to(dtype)
        tp = torch.from_numpy(pos)
        cells[col] = lambda tx=tx, tp=tp: apply(tx, tp)
    tpc = torch.from_numpy(work["cache"][0])

    def cache():
        freqs = tpc[:, None].to(dtype) * inv_freq()
        return freqs.cos(), freqs.sin()

    cells["cache"] = cache
    return cells


def _naive_numba():
    import math

    import numba

    @numba.njit(parallel=True, fastmath=False)
    def naive(positions, theta, c, s):
        for t in numba.prange(positions.shape[0]):
            m = float(positions[t])
            for i in range(theta.shape[0]):
                a = m * theta[i]
                c[t, i] = math.cos(a)
                s[t, i] = math.sin(a)

    return naive


def measure(*, repeat=5, backends=("cpu", "numpy", "cuda"), full=False, cache_positions=CACHE_POSITIONS):
    """Time every (row, column) cell, rows interleaved, best of ``repeat``. Returns a dict."""
    import torch  # noqa: F401 - torch is in the process before anything is timed, as for a user

    backends = list(backends)
    notes = []
    if "cuda" in backends:
        from numba import cuda

        if not cuda.is_available():
            backends.remove("cuda")
            notes.append("cuda: no GPU here, not timed")
    work = _workloads(cache_positions)
    rows = _rows(work, backends, full)
    times = {name: {} for name, _ in rows}
    for rep in range(1 + repeat):  # round 0 warms up (JIT, tables, page faults): discarded
        for col in COLUMNS:
            for name, cells in rows:
                fn = cells.get(col)
                if fn is None:
                    continue
                t0 = time.perf_counter()
                fn()
                dt = time.perf_counter() - t0
                if rep > 0:
                    times[name].setdefault(col, []).append(dt)
    best = {name: {col: min(ts) for col, ts in cols.items() if ts} for name, cols in times.items()}
    return {
        "machine": machine(),
        "workloads": dict(SHAPES, cache=f"cos_sin {cache_positions} x {ROTARY_DIM // 2}"),
        "repeat": repeat,
        "seconds": best,
        "notes": notes,
    }


def machine() -> dict:
    import numba
    import numpy as np
    import torch

    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        layer = numba.threading_layer()
    except ValueError:
        layer = "not started"
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": numba.__version__,
        "numba_threads": numba.get_num_threads(),
        "numba_threading_layer": layer,
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
    }


def _repo_root():
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return here if os.path.isfile(os.path.join(here, "bench", "rope_styles.py")) else None


def measure_slow() -> dict:
    """Wall times of regenerate (whole catalog) and of one conform run, each in a new process."""
    out = {}
    root = _repo_root()
    tmp = tempfile.mkdtemp(prefix="posref-bench-")
    try:
        cmd = [sys.executable, "-m", "conformance.cli", "vectors", "regenerate", "--out", os.path.join(tmp, "vectors")]
        out["regenerate"] = _timed(cmd, root)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if root is None:
        out["conform"] = {"skipped": "bench/rope_styles.py not found (not a source checkout)"}
    else:
        target = os.path.join(root, "bench", "rope_styles.py") + ":spec_following"
        cmd = [sys.executable, "-m", "conformance.cli", "conform", target, "--protocol", "rope.apply"]
        for d in ("float64", "float32", "float16", "bfloat16"):
            cmd += ["--dtype", d]
        out["conform"] = _timed(cmd, root)
    return out


def _timed(cmd, cwd) -> dict:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    tail = (proc.stdout.strip().splitlines() or [""])[-1]
    return {"command": " ".join(cmd[2:]), "seconds": round(seconds, 2), "exit": proc.returncode,
            "last_line": tail[:200]}


# ---- targets and the table ----------------------------------------------------------------------


def check_targets(result) -> list:
    """[{target, measured, met}] for issue 13's targets that this run measured."""
    sec = result.get("seconds", {})
    copy = sec.get("memory copy (numpy)", {})
    fast = sec.get("posref cpu fast", {})
    golden = sec.get("posref cpu golden", {})
    naive = sec.get("numba cos(m*theta), sin(m*theta) (inaccurate)", {})
    out = []

    def add(target, measured, met):
        out.append({"target": target, "measured": measured, "met": bool(met)})

    if "prefill" in fast and "prefill" in copy:
        r = fast["prefill"] / copy["prefill"]
        add("prefill apply (cpu fast) <= 1.3x copy", f"{r:.2f}x", r <= TARGETS["prefill_vs_copy"])
    if "decode" in fast and "decode" in copy:
        bound = TARGETS["decode_vs_copy"] * copy["decode"] + TARGETS["decode_vs_copy_slack_us"] * 1e-6
        add("decode apply (cpu fast) <= 3x copy + 50 us",
            f"{fast['decode'] * 1e6:.0f} us vs {bound * 1e6:.0f} us", fast["decode"] <= bound)
    if "cache" in fast and "cache" in naive:
        r = fast["cache"] / naive["cache"]
        add("cos_sin (cpu fast, accurate) >= plain Numba cos(m*theta) throughput",
            f"{r:.2f}x the plain loop's time", r <= 1.0)
    for col in COLUMNS:
        if col in fast and col in golden:
            r = golden[col] / fast[col]
            add(f"golden <= 3x fast ({col})", f"{r:.2f}x", r <= TARGETS["golden_vs_fast"])
    slow = result.get("slow", {})
    reg = slow.get("regenerate", {})
    if "seconds" in reg:
        add("vectors regenerate (whole catalog, certified) <= 60 s", f"{reg['seconds']:.1f} s",
            reg["seconds"] <= TARGETS["regenerate_s"] and reg["exit"] == 0)
    con = slow.get("conform", {})
    if "seconds" in con:
        add("conform rope.apply, 4 dtypes <= 30 s", f"{con['seconds']:.1f} s",
            con["seconds"] <= TARGETS["conform_s"] and con["exit"] in (0, 1))
    return out


def _fmt(seconds):
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} us"


def render(result) -> str:
    sec = result.get("seconds", {})
    m = result["machine"]
    lines = [
        f"posref bench, {m['date']}: {m['cpu']}, {m['cpu_count']} cores, load {m['load_average']}",
        f"python {m['python']}, numpy {m['numpy']}, numba {m['numba']} ({m['numba_threading_layer']}, "
        f"{m['numba_threads']} threads), torch {m['torch']} ({m['torch_threads']} threads); "
        f"best of {result['repeat']}, rows interleaved; (x) = time / memory copy of the same column",
        "",
    ]
    if sec:
        lines += _rope_table(result)
    if result.get("families"):
        from . import bench_families

        lines += ["", bench_families.render(result["families"])]
    for note in result.get("notes", []):
        lines.append(f"note: {note}")
    slow = result.get("slow")
    if slow:
        lines.append("")
        for key, rec in slow.items():
            if "seconds" in rec:
                lines.append(f"{key}: {rec['seconds']:.1f} s (exit {rec['exit']}): {rec['command']}")
            else:
                lines.append(f"{key}: {rec.get('skipped')}")
    if result.get("targets"):
        lines.append("")
        for t in result["targets"]:
            lines.append(f"[{'met' if t['met'] else 'NOT MET'}] {t['target']}: {t['measured']}")
            if t.get("why"):
                lines.append(f"    why: {t['why']}")
    return "\n".join(lines)


def _rope_table(result) -> list:
    sec = result["seconds"]
    copy = sec.get("memory copy (numpy)", {})
    lines = []
    heads = ["", *(f"{c}: {result['workloads'][c]}" for c in COLUMNS)]
    table = [heads]
    for name, cols in sec.items():
        row = [name]
        for c in COLUMNS:
            if c not in cols:
                row.append("-")
            elif name.startswith("memory copy") or c not in copy:
                row.append(_fmt(cols[c]))
            else:
                row.append(f"{_fmt(cols[c])} ({cols[c] / copy[c]:.2f}x)")
        table.append(row)
    widths = [max(len(r[i]) for r in table) for i in range(len(heads))]
    for k, r in enumerate(table):
        lines.append("| " + " | ".join(v.ljust(w) for v, w in zip(r, widths)) + " |")
        if k == 0:
            lines.append("| " + " | ".join("-" * w for w in widths) + " |")
    return lines


def main(argv=None) -> int:
    """Entry point of ``python bench/run.py``."""
    import argparse

    parser = argparse.ArgumentParser(prog="bench/run.py", description="posref's reference against torch "
                                     "eager and a memory copy, in one table (see posref bench --help).")
    add_arguments(parser)
    return run(parser.parse_args(argv))
