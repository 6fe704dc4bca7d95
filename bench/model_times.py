"""Benchmark: ``posref conform <correct example> --model NAME`` for every zoo model (issue 31).

    python bench/model_times.py [--models a,b] [--protocols rope.apply,...] [--seed 1] [--timeout 600]
                                [--json FILE]

For every zoo model and every protocol its configuration implies (reference.zoo.plan), time one
``posref conform`` run of that protocol's correct example (``EXAMPLES``) at the model, default
options otherwise (cpu, the default dtypes, the committed cases then those drawn from ``--seed``),
in a fresh process: Python start-up, the torch import and the golden work at the model's real
shape are all counted, as a user waits for them. The target is under 30 s a run on the project's
2-core machine. Prints one Markdown row per run (model, protocol, seconds, exit status, verdict
line) and the runs over the target; ``--json`` writes the rows too.

The machine is shared: say how loaded it was (``uptime``'s load average, printed first and last)
beside any number taken from here.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TARGET_S = 30.0

# One correct example per protocol a zoo configuration implies (examples/<family>/).
EXAMPLES = {
    "rope.apply": "examples/rope/hf_rotate_half.py:apply",
    "rope.apply_qk": "examples/rope/hf_rotate_half.py:apply_qk",
    "alibi.slopes": "examples/alibi/fairseq_style.py:slopes",
    "alibi.bias": "examples/alibi/fairseq_style.py:bias",
    "learned.lookup": "examples/learned/gpt2_wpe.py:lookup",
    "t5.bucket": "examples/t5/hf_t5.py:bucket",
    "attention.forward": "examples/attention/sdpa_rope.py:forward",
    "gaussian_rope.apply": "examples/gaussian_rope/gaussian_rope_torch.py:apply",
    "gaussian_rope.score": "examples/gaussian_rope/gaussian_rope_torch.py:score",
    "mrope.positions": "examples/mrope/qwen_vl.py:positions",
    "mrope.apply": "examples/mrope/qwen_vl.py:apply",
    "rope2d.apply": "examples/rope2d/rope_vit.py:apply",
    "sinusoidal.table": "examples/sinusoidal/vaswani_torch.py:table",
    "transformer_xl.score": "examples/transformer_xl/mem_transformer_style.py:score",
}


def runs(models=None, protocols=None) -> list:
    """[(model, protocol)] of every zoo model's implied protocols (filtered)."""
    sys.path.insert(0, ROOT)
    from reference import zoo
    from reference.zoo.plan import plan

    out = []
    for name in zoo.names():
        if models and name not in models:
            continue
        for protocol in plan(zoo.load(name)["config"]):
            if (not protocols or protocol in protocols) and protocol in EXAMPLES:
                out.append((name, protocol))
    return out


def time_one(model: str, protocol: str, seed: int, timeout: float) -> dict:
    cmd = [sys.executable, "-m", "conformance.cli", "conform", EXAMPLES[protocol], "--protocol", protocol,
           "--model", model, "--seed", str(seed)]
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)
        rc, text = proc.returncode, (proc.stdout.strip() or proc.stderr.strip())
    except subprocess.TimeoutExpired:
        rc, text = None, f"over the {timeout:.0f} s timeout"
    seconds = time.perf_counter() - t0
    last = text.splitlines()[-1] if text else ""
    return {"model": model, "protocol": protocol, "seconds": round(seconds, 1), "rc": rc, "last": last[:100]}


def load() -> str:
    try:
        return " ".join(f"{v:.1f}" for v in os.getloadavg())
    except OSError:
        return "?"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", help="comma-separated zoo names (default: all)")
    ap.add_argument("--protocols", help="comma-separated protocols (default: all a model implies)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    todo = runs(set(args.models.split(",")) if args.models else None,
                set(args.protocols.split(",")) if args.protocols else None)
    print(f"load average at start: {load()}  ({os.cpu_count()} cores)")
    print("| model | protocol | seconds | exit | last line |")
    print("|---|---|---:|---:|---|")
    rows = []
    for model, protocol in todo:
        row = time_one(model, protocol, args.seed, args.timeout)
        rows.append(row)
        print(f"| {model} | {protocol} | {row['seconds']:.1f} | {row['rc']} | {row['last']} |", flush=True)
    print(f"load average at end: {load()}")
    slow = [r for r in rows if r["seconds"] > TARGET_S]
    print(f"{len(slow)} of {len(rows)} runs over {TARGET_S:.0f} s: "
          + (", ".join(f"{r['model']} {r['protocol']} ({r['seconds']:.0f} s)" for r in slow) or "none"))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"load_start_end": load(), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
