"""Benchmark: ``posref conform <correct example> --model NAME`` for every zoo model (issue 31).

    python bench/model_times.py [--models a,b] [--protocols rope.apply,...] [--seed 1] [--timeout 600]
                                [--json FILE]

For every zoo model and every protocol its configuration implies (reference.zoo.plan), time one
``posref conform`` run of that protocol's correct example (``EXAMPLES``) at the model, default
options otherwise (cpu, the default dtypes, the committed cases then those drawn from ``--seed``),
in a fresh process: Python start-up, the torch import and the golden work at the model's real
shape are all counted, as a user waits for them. Where that example implements none of the model's
cases (every case Unsupported: YaRN, LongRoPE, interleaved pairs), the model's own transformers
rotary code is timed instead (``FALLBACK``). The target is under 30 s a run on the project's
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

# Where the spec-following example raises Unsupported for every case of a model (YaRN, LongRoPE,
# dynamic NTK, interleaved or partial pairs), the model's own transformers rotary code is timed instead:
# ``apply`` / ``apply_qk`` below, built for the model named by MODEL_ENV
# (examples/rope/lib_transformers_config.py, as tests/rope/test_model_grading.py grades it).
FALLBACK = {"rope.apply": ("examples/rope/gptj_rotate_every_two.py:apply", "bench/model_times.py:apply"),
            "rope.apply_qk": ("bench/model_times.py:apply_qk",)}
MODEL_ENV = "POSREF_BENCH_MODEL"
_ADAPTERS: dict = {}


def _model_adapter(protocol: str):
    name = os.environ[MODEL_ENV]
    if (name, protocol) not in _ADAPTERS:
        from examples.rope.lib_transformers_config import adapter_for

        _ADAPTERS[name, protocol] = adapter_for(name, protocol)
    return _ADAPTERS[name, protocol]


def apply(x, positions, spec):
    """rope.apply through transformers' rotary code of the model named by POSREF_BENCH_MODEL."""
    return _model_adapter("rope.apply")(x, positions, spec)


def apply_qk(q, k, positions, spec):
    """rope.apply_qk through transformers' rotary code of the model named by POSREF_BENCH_MODEL."""
    return _model_adapter("rope.apply_qk")(q, k, positions, spec)


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


def graded_nothing(row: dict) -> bool:
    """Every case skipped (Unsupported) or an error (the example cannot run this model)."""
    return row["rc"] == 1 and " 0 passed, " in row["last"] and "failed" not in row["last"]


def time_one(model: str, protocol: str, seed: int, timeout: float) -> dict:
    """One timed run with the protocol's example; again with each of FALLBACK's while the last run
    graded nothing (that run's row is kept when none grades anything)."""
    row = _time(model, protocol, EXAMPLES[protocol], seed, timeout)
    for target in FALLBACK.get(protocol, ()):
        if not graded_nothing(row):
            break
        row = _time(model, protocol, target, seed, timeout)
    return row


def _time(model: str, protocol: str, target: str, seed: int, timeout: float) -> dict:
    cmd = [sys.executable, "-m", "conformance.cli", "conform", target, "--protocol", protocol,
           "--model", model, "--seed", str(seed)]
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), MODEL_ENV: model}
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)
        rc, text = proc.returncode, (proc.stdout.strip() or proc.stderr.strip())
    except subprocess.TimeoutExpired:
        rc, text = None, f"over the {timeout:.0f} s timeout"
    seconds = time.perf_counter() - t0
    last = text.splitlines()[-1] if text else ""
    return {"model": model, "protocol": protocol, "target": target, "seconds": round(seconds, 1), "rc": rc,
            "last": last[:100]}


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
    print("| model | protocol | example | seconds | exit | verdict |")
    print("|---|---|---|---:|---:|---|")
    rows = []
    for model, protocol in todo:
        row = time_one(model, protocol, args.seed, args.timeout)
        rows.append(row)
        verdict = row["last"].split(": ", 1)[-1].split(" (vectors")[0]
        example = row["target"].rsplit("/", 1)[-1]
        print(f"| {model} | {protocol} | {example} | {row['seconds']:.1f} | {row['rc']} | {verdict} |", flush=True)
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
