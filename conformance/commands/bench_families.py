"""The families table of ``posref bench``: every family's cpu reference against a memory copy of
its output bytes, and the attention layer against torch eager float64 SDPA (issue 13).

One row per family, declared by the family in ``reference/<family>/bench.py`` (``WORKLOAD``,
``GOLDEN_WORKLOAD``, ``cells(rng)``) and found through the family registry, so adding a family
edits nothing here; every cell measured in the same run with the rows interleaved (each
repetition runs every cell once; a discarded warm-up round first) and the best kept, as in the
RoPE table. Cells:

- **copy**: numpy ``copy()`` of an array with the bytes of the fast output (float64, int64 for
  T5's buckets; for xPos q and k together), the floor of any out-of-place computation;
- **fast**: the family's cpu reference, fast mode, at a prefill-like workload (its ``WORKLOAD``);
- **golden**: golden mode. A family whose golden mode runs a certified quick phase (sinusoidal;
  since issue 31 also 2-D RoPE, M-RoPE, Gaussian RoPE and xPos: phase.py's golden rotations)
  declares ``GOLDEN_WORKLOAD = None`` and is timed on its fast workload, the ratio golden / fast
  there. One whose golden mode still evaluates each value in mpmath is timed on a small workload
  (``GOLDEN_WORKLOAD``), next to fast mode on that same small workload (``fast_small``), and the
  ratio is golden / fast there.

A cell whose warm-up and first timed run both took longer than ``SLOW_CELL_S`` is not run
again (best of 1), so that
the per-element Python paths (xPos's and Gaussian RoPE's fast factors, T5's buckets) keep the
bench short; their shapes are smaller than the prefill for the same reason, and the table says so.

Attention: ``reference.attention.forward`` (cpu, fast: Dot2 projections and dot products,
compensated softmax sums) on [1, 512, 512], 8 heads of 64, RoPE, causal, against torch eager
float64 with the same projections, HF-style RoPE and ``scaled_dot_product_attention(is_causal=True)``;
golden mode on a tiny layer for information.

Targets (issues 13 and 31): elementwise families fast <= 1.3x copy (a compute-bound family whose
bench.py times a ``floor`` cell, FIRE's MLP arithmetic at the machine's measured float64
throughput: fast <= 1.3x that floor instead), golden <= 3x fast; attention fast <= 1.5x torch eager
float64 SDPA. A target that is not met is printed with the family's reason (its bench.py's
``UNMET = {"fast": ..., "golden": ...}``: why it cannot be met on this machine), so the table says
what was measured and why.
"""

from __future__ import annotations

import time

from reference import families

TARGETS = {"fast_vs_copy": 1.3, "golden_vs_fast": 3.0, "attention_vs_torch": 1.5}
SLOW_CELL_S = 1.0  # warm-up and first timed run both slower than this: not repeated
# RoPE has its own table (conformance/commands/bench.py); attention is timed against torch here.
OWN_TABLE = ("rope",)


def row_modules() -> dict:
    """{family: its reference/<family>/bench.py}, every family but those with a table of their own
    (tests/test_family_contract.py checks that each declares one)."""
    out = {}
    for name in families.names():
        module = families.part(name, "bench")
        if module is not None and name not in OWN_TABLE:
            out[name] = module
    return out


def workloads() -> dict:
    """{family: fast workload label}; attention's as its layer's label."""
    from reference.attention import bench as attention

    out = {name: m.WORKLOAD for name, m in row_modules().items() if name != "attention"}
    out["attention"] = attention.label(attention.WORKLOAD)
    return out


def golden_workloads() -> dict:
    """{family: golden workload label} where golden mode is timed on a smaller workload."""
    from reference.attention import bench as attention

    out = {name: m.GOLDEN_WORKLOAD for name, m in row_modules().items()
           if name != "attention" and m.GOLDEN_WORKLOAD}
    out["attention"] = attention.label(attention.GOLDEN_WORKLOAD)
    return out


def family_rows():
    """[(family, {"copy", "fast", "golden"?, "fast_small"?: callable})], inputs built once."""
    import numpy as np

    rng = np.random.default_rng(13)
    return [(name, m.cells(rng)) for name, m in row_modules().items() if name != "attention"]


def torch_attention(X, W, pos, heads, base=10000.0):
    """A callable: torch eager float64, the same layer (projections, HF rotate_half RoPE, causal
    ``scaled_dot_product_attention``, output projection)."""
    import torch

    b, s, D = X.shape
    d = D // heads
    tx = torch.from_numpy(X)
    tw = {n: torch.from_numpy(v) for n, v in W.items()}
    tp = torch.from_numpy(pos)

    def rotate_half(t):
        return torch.cat((-t[..., d // 2:], t[..., : d // 2]), dim=-1)

    def forward():
        inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.int64).to(torch.float64) / d))
        freqs = tp[..., None].to(torch.float64) * inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[:, None], emb.sin()[:, None]  # [b, 1, s, d]
        q = (tx @ tw["wq"].T).view(b, s, heads, d).transpose(1, 2)
        k = (tx @ tw["wk"].T).view(b, s, heads, d).transpose(1, 2)
        v = (tx @ tw["wv"].T).view(b, s, heads, d).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return o.transpose(1, 2).reshape(b, s, D) @ tw["wo"].T

    return forward


def attention_cells():
    """{"torch", "fast", "fast_small", "golden": callable}: the reference's cells
    (reference/attention/bench.py) and torch eager float64 SDPA on the same layer."""
    from reference.attention import bench as attention

    shape = attention.WORKLOAD
    X, W, pos = attention.inputs(**shape)
    return {"torch": torch_attention(X, W, pos, shape["heads"]), **attention.cells(None)}


def measure(repeat=5) -> dict:
    """Time every cell (rows interleaved, best of ``repeat`` after a warm-up round)."""
    import torch

    torch.ones(8).sin()  # torch has run in the process before anything is timed, as for a user
    rows = family_rows() + [("attention", attention_cells())]
    times = {name: {} for name, _ in rows}
    slow, warm = set(), {}
    for rep in range(1 + repeat):
        for name, cells in rows:
            for cell, fn in cells.items():
                if (name, cell) in slow:
                    continue
                t0 = time.perf_counter()
                fn()
                dt = time.perf_counter() - t0
                if rep == 0:
                    warm[(name, cell)] = dt
                else:
                    times[name].setdefault(cell, []).append(dt)
                    if min(dt, warm[(name, cell)]) > SLOW_CELL_S:  # slow twice: not noise
                        slow.add((name, cell))
    seconds = {name: {cell: min(ts) for cell, ts in cells.items()} for name, cells in times.items()}
    counts = {name: {cell: len(ts) for cell, ts in cells.items()} for name, cells in times.items()}
    return {
        "workloads": workloads(),
        "golden_workloads": golden_workloads(),
        "seconds": seconds,
        "repetitions": counts,
        "repeat": repeat,
    }


def check_targets(fam) -> list:
    """[{target, measured, met, why?}] for the families and attention; ``why``, where a target is not
    met, is the family's stated reason (its bench.py's ``UNMET``)."""
    out = []
    sec = fam["seconds"]
    modules = row_modules()

    def add(name, kind, target, ratio, limit):
        row = {"target": target, "measured": f"{ratio:.2f}x", "met": bool(ratio <= limit)}
        why = getattr(modules.get(name), "UNMET", {}).get(kind)
        if not row["met"] and why:
            row["why"] = why
        out.append(row)

    for name, cells in sec.items():
        if name == "attention":
            continue
        if "fast" in cells and "floor" in cells:
            add(name, "fast", f"{name} fast (cpu) <= 1.3x its arithmetic at the measured float64 throughput "
                f"({fam['workloads'][name]})", cells["fast"] / cells["floor"], TARGETS["fast_vs_copy"])
        elif "fast" in cells and "copy" in cells:
            add(name, "fast", f"{name} fast (cpu) <= 1.3x copy ({fam['workloads'][name]})",
                cells["fast"] / cells["copy"], TARGETS["fast_vs_copy"])
        if "golden" in cells:
            base = cells.get("fast_small", cells.get("fast"))
            where = fam["golden_workloads"].get(name, fam["workloads"][name])
            add(name, "golden", f"{name} golden <= 3x fast ({where})", cells["golden"] / base,
                TARGETS["golden_vs_fast"])
    att = sec.get("attention", {})
    if "fast" in att and "torch" in att:
        add("attention", "fast", "attention fast (cpu) <= 1.5x torch eager float64 SDPA", att["fast"] / att["torch"],
            TARGETS["attention_vs_torch"])
    return out


def _fmt(seconds):
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} us"


def _table(heads, body):
    table = [heads, *body]
    widths = [max(len(r[i]) for r in table) for i in range(len(heads))]
    lines = []
    for k, r in enumerate(table):
        lines.append("| " + " | ".join(v.ljust(w) for v, w in zip(r, widths)) + " |")
        if k == 0:
            lines.append("| " + " | ".join("-" * w for w in widths) + " |")
    return lines


def render(fam) -> str:
    sec, reps = fam["seconds"], fam["repetitions"]
    lines = [f"families (cpu backend, float64; best of {fam['repeat']}, rows interleaved; '(best of 1)': "
             f"warm-up and first run over {SLOW_CELL_S:g} s, timed once; fast (x) = fast / copy, golden (x) = golden / fast "
             "on the golden workload)", ""]
    body = []
    for name, cells in sec.items():
        if name == "attention":
            continue

        def cell(c):
            if c not in cells:
                return "-"
            note = " (best of 1)" if reps[name].get(c) == 1 and fam["repeat"] > 1 else ""
            return _fmt(cells[c]) + note

        fast = cell("fast")
        if "fast" in cells and "copy" in cells:
            fast += f" ({cells['fast'] / cells['copy']:.2f}x)"
        if "fast" in cells and "floor" in cells:
            fast += f"; {cells['fast'] / cells['floor']:.2f}x its arithmetic ({_fmt(cells['floor'])})"
        if "golden" in cells:
            base = cells.get("fast_small", cells.get("fast"))
            golden = f"{cell('golden')} ({cells['golden'] / base:.2f}x)"
            if "fast_small" in cells:
                golden += f" on {fam['golden_workloads'][name]}, fast there {_fmt(cells['fast_small'])}"
        else:
            golden = "- (exact, one mode)"
        body.append([name, fam["workloads"][name], cell("copy"), fast, golden])
    lines += _table(["family", "workload", "memory copy", "cpu fast", "cpu golden"], body)
    att = sec.get("attention")
    if att:
        lines.append("")
        row = ["attention", fam["workloads"]["attention"], _fmt(att["torch"]) if "torch" in att else "-",
               f"{_fmt(att['fast'])} ({att['fast'] / att['torch']:.2f}x)" if "fast" in att and "torch" in att else "-",
               (f"{_fmt(att['golden'])} ({att['golden'] / att['fast_small']:.0f}x fast) on "
                f"{fam['golden_workloads']['attention']}") if "golden" in att else "-"]
        lines += _table(["", "workload", "torch eager float64 SDPA", "posref cpu fast (x torch)", "posref golden"],
                        [row])
    return "\n".join(lines)
