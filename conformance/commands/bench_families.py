"""The families table of ``posref bench``: every family's cpu reference against a memory copy of
its output bytes, and the attention layer against torch eager float64 SDPA (issue 13).

One row per family, every cell measured in the same run with the rows interleaved (each
repetition runs every cell once; a discarded warm-up round first) and the best kept, as in the
RoPE table. Cells:

- **copy**: numpy ``copy()`` of an array with the bytes of the fast output (float64, int64 for
  T5's buckets; for xPos q and k together), the floor of any out-of-place computation;
- **fast**: the family's cpu reference, fast mode, at a prefill-like workload (``FAMILY_SHAPES``);
- **golden**: golden mode. Where golden mode evaluates each value in mpmath (every family but
  sinusoidal, whose golden table runs the RoPE quick-phase kernels) it is timed on a small
  workload, next to fast mode on that same small workload, and the ratio is golden / fast there.

A cell whose warm-up and first timed run both took longer than ``SLOW_CELL_S`` is not run
again (best of 1), so that
the per-element Python paths (xPos's and Gaussian RoPE's fast factors, T5's buckets) keep the
bench short; their shapes are smaller than the prefill for the same reason, and the table says so.

Attention: ``reference.attention.forward`` (cpu, fast: Dot2 projections and dot products,
compensated softmax sums) on [1, 512, 512], 8 heads of 64, RoPE, causal, against torch eager
float64 with the same projections, HF-style RoPE and ``scaled_dot_product_attention(is_causal=True)``;
golden mode on a tiny layer for information.

Targets (issue 13): elementwise families fast <= 1.3x copy, golden <= 3x fast; attention fast
<= 2x torch eager float64 SDPA.
"""

from __future__ import annotations

import math
import time

TARGETS = {"fast_vs_copy": 1.3, "golden_vs_fast": 3.0, "attention_vs_torch": 2.0}
SLOW_CELL_S = 1.0  # warm-up and first timed run both slower than this: not repeated

PREFILL = (1, 4096, 32, 128)  # the RoPE prefill shape
FAMILY_SHAPES = {
    "sinusoidal": "table 4096 positions x d_model 4096",
    "gaussian_rope": "apply [1, 4096, 32, 128]",
    "xpos": "apply q, k [1, 1024, 32, 128]",
    "rope2d": "apply [1, 4096, 32, 128], 64 x 64 grid",
    "mrope": "apply [1, 4096, 32, 128], qwen2 [16, 24, 24]",
    "alibi": "bias [4, 4096, 4096]",
    "kerple": "bias log [4, 4096, 4096]",
    "fire": "bias [4, 4096, 4096], hidden 32",
    "t5": "bucket [256, 256]",
}
GOLDEN_SHAPES = {  # where golden mode is timed on a smaller workload (mpmath per value)
    "gaussian_rope": "apply [1, 4, 4, 128]",
    "xpos": "apply q, k [1, 2, 4, 128]",
    "rope2d": "apply [1, 4, 4, 128]",
    "mrope": "apply [1, 4, 4, 128]",
    "alibi": "bias [4, 64, 64]",
    "kerple": "bias log [4, 32, 32]",
    "fire": "bias [4, 16, 16], hidden 32",
}
ATTENTION = {"batch": 1, "seq": 512, "d_model": 512, "heads": 8}
ATTENTION_GOLDEN = {"batch": 1, "seq": 8, "d_model": 32, "heads": 4}


def _fire_weights(rng, heads, hidden=32):
    return {"c": 0.1, "L_multiplier": 1.0, "W1": rng.uniform(-0.5, 0.5, (hidden, 1)),
            "b1": rng.uniform(-0.5, 0.5, hidden), "W2": rng.uniform(-0.125, 0.125, (heads, hidden)),
            "b2": rng.uniform(-0.125, 0.125, heads)}


def _grid(seq):
    import numpy as np

    side = int(math.isqrt(seq))
    t = np.arange(seq, dtype=np.int64)
    return np.stack([t % side, t // side], axis=-1)[None]  # (column, row) of a side x side grid


def _mrope_positions(seq):
    """[3, 1, seq]: a 64 x 64 image's (t, h, w) (qwen2-style), text-like where seq is not a square."""
    import numpy as np

    g = _grid(seq)[0]
    return np.stack([np.zeros(seq, dtype=np.int64), g[:, 1], g[:, 0]])[:, None, :]


def family_rows():
    """[(family, {"copy", "fast", "golden", "fast_small"?: callable})], inputs built once."""
    import numpy as np

    from reference import alibi, fire, gaussian_rope, kerple, mrope, rope2d, sinusoidal, t5, xpos

    rng = np.random.default_rng(13)
    x = rng.standard_normal(PREFILL)
    pos = np.arange(PREFILL[1], dtype=np.int64)[None, :]
    rows = []

    # sinusoidal: golden runs RoPE's vectorised quick phase, so the full table is timed
    sp = np.arange(4096, dtype=np.int64)
    src = np.ones((4096, 4096))
    rows.append(("sinusoidal", {
        "copy": lambda: src.copy(),
        "fast": lambda: sinusoidal.table(sp, 4096),
        "golden": lambda: sinusoidal.table(sp, 4096, mode="golden"),
    }))

    small = rng.standard_normal((1, 4, 4, 128))
    spos = np.arange(4, dtype=np.int64)[None, :]
    kern = gaussian_rope.DOCUMENT_KERNEL
    rows.append(("gaussian_rope", {
        "copy": lambda: x.copy(),
        "fast": lambda: gaussian_rope.apply(x, pos, kernel=kern),
        "fast_small": lambda: gaussian_rope.apply(small, spos, kernel=kern),
        "golden": lambda: gaussian_rope.apply(small, spos, kernel=kern, mode="golden"),
    }))

    q, k = x[:, :1024], x[:, 1024:2048]
    qk = x[:, :2048]
    xpos_pos = pos[:, :1024]
    sq, sk = small[:, :2], small[:, 2:]
    rows.append(("xpos", {
        "copy": lambda: qk.copy(),
        "fast": lambda: xpos.apply(q, k, xpos_pos),
        "fast_small": lambda: xpos.apply(sq, sk, spos[:, :2]),
        "golden": lambda: xpos.apply(sq, sk, spos[:, :2], mode="golden"),
    }))

    coords, scoords = _grid(PREFILL[1]), _grid(4)
    rows.append(("rope2d", {
        "copy": lambda: x.copy(),
        "fast": lambda: rope2d.apply(x, coords),
        "fast_small": lambda: rope2d.apply(small, scoords),
        "golden": lambda: rope2d.apply(small, scoords, mode="golden"),
    }))

    mp, smp = _mrope_positions(PREFILL[1]), _mrope_positions(4)
    sec = [16, 24, 24]
    rows.append(("mrope", {
        "copy": lambda: x.copy(),
        "fast": lambda: mrope.apply(x, mp, mrope_section=sec),
        "fast_small": lambda: mrope.apply(small, smp, mrope_section=sec),
        "golden": lambda: mrope.apply(small, smp, mrope_section=sec, mode="golden"),
    }))

    heads = 4
    bp = np.arange(4096, dtype=np.int64)
    bias_src = np.ones((heads, 4096, 4096))
    a64, a32, a16 = (np.arange(n, dtype=np.int64) for n in (64, 32, 16))
    rows.append(("alibi", {
        "copy": lambda: bias_src.copy(),
        "fast": lambda: alibi.bias(heads, bp, bp),
        "fast_small": lambda: alibi.bias(heads, a64, a64),
        "golden": lambda: alibi.bias(heads, a64, a64, mode="golden"),
    }))
    r1 = [0.5, 1.0, 2.0, 4.0]
    r2 = [0.25, 0.5, 1.0, 1.5]
    rows.append(("kerple", {
        "copy": lambda: bias_src.copy(),
        "fast": lambda: kerple.bias(bp, bp, "log", r1, r2),
        "fast_small": lambda: kerple.bias(a32, a32, "log", r1, r2),
        "golden": lambda: kerple.bias(a32, a32, "log", r1, r2, mode="golden"),
    }))
    w = _fire_weights(rng, heads)
    rows.append(("fire", {
        "copy": lambda: bias_src.copy(),
        "fast": lambda: fire.bias(bp, bp, w),
        "fast_small": lambda: fire.bias(a16, a16, w),
        "golden": lambda: fire.bias(a16, a16, w, mode="golden"),
    }))

    rel = np.arange(256, dtype=np.int64)[None, :] - np.arange(256, dtype=np.int64)[:, None]
    t5_src = np.ones((256, 256), dtype=np.int64)
    rows.append(("t5", {  # one mode: the buckets are exact integers
        "copy": lambda: t5_src.copy(),
        "fast": lambda: t5.bucket(rel),
    }))
    return rows


def _attention_inputs(batch, seq, d_model, heads, seed=13):
    import numpy as np

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((batch, seq, d_model))
    W = {n: rng.standard_normal((d_model, d_model)) / math.sqrt(d_model) for n in ("wq", "wk", "wv", "wo")}
    pos = np.broadcast_to(np.arange(seq, dtype=np.int64), (batch, seq)).copy()
    return X, W, pos


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
    """{"torch": callable, "fast": callable, "fast_small", "golden": callable}."""
    from reference import attention

    out = {}
    for key, shape in (("", ATTENTION), ("_small", ATTENTION_GOLDEN)):
        X, W, pos = _attention_inputs(**shape)
        heads = shape["heads"]
        cfg = attention.Config(num_heads=heads, num_kv_heads=heads, head_dim=shape["d_model"] // heads)
        if key == "":
            out["torch"] = torch_attention(X, W, pos, heads)
            out["fast"] = lambda X=X, W=W, pos=pos, cfg=cfg: attention.forward(X, W, pos, cfg)
        else:
            out["fast_small"] = lambda X=X, W=W, pos=pos, cfg=cfg: attention.forward(X, W, pos, cfg)
            out["golden"] = lambda X=X, W=W, pos=pos, cfg=cfg: attention.forward(X, W, pos, cfg, mode="golden")
    return out


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
        "workloads": dict(FAMILY_SHAPES, attention=_attention_label(ATTENTION)),
        "golden_workloads": dict(GOLDEN_SHAPES, attention=_attention_label(ATTENTION_GOLDEN)),
        "seconds": seconds,
        "repetitions": counts,
        "repeat": repeat,
    }


def _attention_label(a):
    return (f"forward [{a['batch']}, {a['seq']}, {a['d_model']}], {a['heads']} heads of "
            f"{a['d_model'] // a['heads']}, RoPE, causal")


def check_targets(fam) -> list:
    """[{target, measured, met}] for the families and attention."""
    out = []
    sec = fam["seconds"]
    for name, cells in sec.items():
        if name == "attention":
            continue
        if "fast" in cells and "copy" in cells:
            r = cells["fast"] / cells["copy"]
            out.append({"target": f"{name} fast (cpu) <= 1.3x copy ({fam['workloads'][name]})",
                        "measured": f"{r:.2f}x", "met": bool(r <= TARGETS["fast_vs_copy"])})
        if "golden" in cells:
            base = cells.get("fast_small", cells.get("fast"))
            r = cells["golden"] / base
            where = fam["golden_workloads"].get(name, fam["workloads"][name])
            out.append({"target": f"{name} golden <= 3x fast ({where})", "measured": f"{r:.2f}x",
                        "met": bool(r <= TARGETS["golden_vs_fast"])})
    att = sec.get("attention", {})
    if "fast" in att and "torch" in att:
        r = att["fast"] / att["torch"]
        out.append({"target": "attention fast (cpu) <= 2x torch eager float64 SDPA", "measured": f"{r:.2f}x",
                    "met": bool(r <= TARGETS["attention_vs_torch"])})
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
