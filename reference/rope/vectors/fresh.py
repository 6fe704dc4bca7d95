"""RoPE's fresh cases (reference.golden.fresh): drawn at run time from the run's seed, in no file.
Drawn model configurations for every protocol, the frequency ladders of rope.frequencies, grouped-
query cases of rope.apply_qk, and rope.apply's serving shape matrix (``shape_matrix``).
"""

from __future__ import annotations

import numpy as np

from reference.golden.catalog import TestGroupSpec
from reference.golden.shapes import (DECODE_BATCHES, FAR_POSITION, HEAD_COUNTS, LONG_PREFILL, TAIL_LENGTHS,
                                     TILE_LENGTHS, decode_rows, heads_unlike, select)

from .catalog import frequency_test
from .models import MODELS, SCALED_MODELS, UNCOMMON_HEAD_DIMS, model_flags, scaling_flags
from .records import LAYOUT_FLAG, QkTest, RopeTest, rope_params


def _fresh_positions(draw, context):
    """[b][s] positions below a limit drawn from the model's context, 2^17 and 2^24."""
    limit = draw.choice((context, 2**17, 2**24))
    b, s = draw.integer(1, 3), draw.integer(1, 6)
    return tuple(tuple(draw.integers(0, limit - 1, s)) for _ in range(b)), limit


def _fresh_rotations(draw, protocol):
    """Two cases, each a model configuration (scaled ones included) at random positions."""
    groups = []
    for k in range(2):
        name = draw.choice(sorted(MODELS) + sorted(SCALED_MODELS))
        model = MODELS.get(name) or SCALED_MODELS[name]
        flags = model_flags(name) if name in MODELS else scaling_flags(name)
        positions, limit = _fresh_positions(draw, model.get("context", 131072))
        heads = draw.integer(1, 3) if protocol == "rope.apply" else 2
        test = RopeTest(f"{name}-{k}", f"Drawn at run time: {name}'s configuration at "
                        f"{len(positions)} x {len(positions[0])} positions below {limit}.",
                        flags + (LAYOUT_FLAG[model["params"]["layout"]],), positions, heads)
        groups.append(TestGroupSpec(model["params"], (test,), model["source"]))
    return groups


# The shape matrix of serving (rope.apply only): batched decode, tile-boundary lengths, head
# counts, partial rotary at every catalog head size, long prefill, the tensor layouts and
# in-place kernels. Everything is drawn from the run's seed; `--shapes full` grades all of it,
# a default run a sample (SAMPLE_KINDS: one case of each kind). The tensor-layout cases are in the
# full matrix only: an adapter written before spec.tensor_layout existed does not know to raise
# Unsupported for them, and a default run must keep grading it as before.
PARTIAL_HEAD_DIMS = (64, 80, 96, 128, 256)  # the catalog's head sizes; rotary_dim = head_dim / 4
SAMPLE_KINDS = ("decode", "seq", "heads", "dim", "inplace")
# Graded by every run, whatever the seed: the lengths just past a tile of 64, 128 and 256 in both
# layouts (kind "seq-tail"). A kernel that leaves its last partial tile unrotated fails them all.
ALWAYS_KINDS = ("seq-tail",)
SEQ_LENGTHS = tuple(sorted(set(TILE_LENGTHS) | set(TAIL_LENGTHS)))


def _shape_config(layout):
    name = "llama3-d128" if layout == "half" else "llama2-d128-meta"
    return name, MODELS[name]


def _shape_test(kind, name, comment, flags, positions, heads, layout, **extra):
    config, model = _shape_config(layout)
    flags = flags + (LAYOUT_FLAG[layout], "ShapeMatrix")
    test = RopeTest(f"shape-{name}-{layout}", f"Drawn at run time ({config}'s configuration): {comment}",
                    flags, positions, heads, **extra)
    return kind, TestGroupSpec(model["params"], (test,), model["source"])


def shape_matrix(draw) -> list:
    """[(kind, TestGroupSpec)] of the whole shape matrix, every position drawn from ``draw``."""
    out = []
    for layout in ("half", "interleaved"):
        for b in DECODE_BATCHES:
            # Row 0 is never position 0 (there a rotation is the identity); rows 1 and b-1 are
            # the farthest apart a 128K context allows.
            rows = decode_rows(draw, b, FAR_POSITION)
            out.append(_shape_test("decode", f"decode-b{b}", f"continuous-batching decode: {b} rows of one "
                                   f"token each, each row at its own position ({rows[:3]}...; 0 and {FAR_POSITION} "
                                   "included).", ("Decode", "RowOffsets", "LongContext", "BatchedDecode"),
                                   tuple((p,) for p in rows), heads_unlike(b, 1), layout))
        for n in SEQ_LENGTHS:
            starts = (draw.integer(0, 4096), draw.integer(0, FAR_POSITION - n))
            out.append(_shape_test("seq-tail" if n in TAIL_LENGTHS else "seq", f"seq-{n}", f"2 rows of {n} tokens from positions {list(starts)}: "
                                   "a length at or around a power-of-two tile.",
                                   ("Prefill", "RowOffsets", "TileBoundary"),
                                   tuple(tuple(range(s0, s0 + n)) for s0 in starts), heads_unlike(2, n), layout))
        for h in HEAD_COUNTS:
            rows = tuple(tuple(draw.integers(0, 65535, 5)) for _ in range(2))
            out.append(_shape_test("heads", f"heads-{h}", f"{h} heads, 2 rows of 5 tokens at drawn positions.",
                                   ("HeadCount",), rows, h, layout))
        for d in PARTIAL_HEAD_DIMS:
            r = d // 4
            rows = tuple(tuple(draw.integers(0, 32767, 4)) for _ in range(3))
            test = RopeTest(f"shape-dim-d{d}-r{r}-{layout}", f"Drawn at run time: head {d}, rotary_dim {r} "
                            f"(partial rotary, base 10000), 3 rows of 4 tokens, 8 heads.",
                            ("PartialRotary", "ShapeMatrix", LAYOUT_FLAG[layout]) + (
                                ("UncommonHeadDim",) if d in UNCOMMON_HEAD_DIMS else ()), rows, 8)
            out.append(("dim", TestGroupSpec(rope_params(d, 1e4, layout, rotary_dim=r), (test,))))
        start = draw.integer(0, 4096)
        out.append(_shape_test("long", f"prefill-{LONG_PREFILL}", f"a long prefill: {LONG_PREFILL} tokens from "
                               f"position {start}.", ("Prefill", "LongPrefill"),
                               (tuple(range(start, start + LONG_PREFILL)),), 3, layout))
        # Tensor layouts: the same kinds of batch in [b, h, s, d] and token-flattened form.
        rows = decode_rows(draw, 7, FAR_POSITION)
        out.append(_shape_test("tensor-layout", "bhsd-decode-b7", f"batched decode (7 rows, positions {rows[:3]}"
                               "...) handed over as x [b, h, s, d] (HF attention's layout).",
                               ("BatchedDecode", "TensorLayout"), tuple((p,) for p in rows), 3, layout,
                               tensor_layout="bhsd"))
        starts = (draw.integer(0, 4096), draw.integer(0, FAR_POSITION - 129))
        out.append(_shape_test("tensor-layout", "bhsd-seq-129", f"2 rows of 129 tokens from {list(starts)} as "
                               "x [b, h, s, d].", ("TileBoundary", "TensorLayout"),
                               tuple(tuple(range(s0, s0 + 129)) for s0 in starts), 3, layout, tensor_layout="bhsd"))
        lengths = (1, 63, 129, 5)
        offsets = [draw.integer(0, 8192) for _ in lengths]
        packed = tuple(p for n, o in zip(lengths, offsets) for p in range(o, o + n))
        bounds = tuple(int(c) for c in np.cumsum((0,) + lengths))
        out.append(_shape_test("tensor-layout", "thd-varlen", f"4 sequences of {list(lengths)} tokens packed "
                               f"into x [total_tokens, h, d] (cu_seqlens {list(bounds)}), each continuing from "
                               f"its own cache length {offsets}.", ("TensorLayout", "Varlen", "RowOffsets"),
                               (packed,), 3, layout, tensor_layout="thd", cu_seqlens=bounds))
        rows = decode_rows(draw, 7, FAR_POSITION)
        out.append(_shape_test("tensor-layout", "thd-decode-b7", "7 decode tokens of 7 sequences packed into "
                               "x [7, h, d] (cu_seqlens 0..7).", ("BatchedDecode", "TensorLayout", "Varlen"),
                               (tuple(rows),), 3, layout, tensor_layout="thd", cu_seqlens=tuple(range(8))))
        # In-place kernels: spec.inplace allows writing into x.
        rows = decode_rows(draw, 7, FAR_POSITION)
        out.append(_shape_test("inplace", "inplace-decode-b7", "batched decode with spec.inplace: the adapter "
                               "may write into x; the written x is graded.", ("BatchedDecode", "InPlace"),
                               tuple((p,) for p in rows), 3, layout, inplace=True))
        starts = (draw.integer(0, 4096), draw.integer(0, FAR_POSITION - 129))
        out.append(_shape_test("inplace", "inplace-seq-129", "2 rows of 129 tokens with spec.inplace.",
                               ("TileBoundary", "InPlace"), tuple(tuple(range(s0, s0 + 129)) for s0 in starts),
                               3, layout, inplace=True))
    return out


def fresh_apply(draw, shapes="sample"):
    """rope.apply's fresh cases: two drawn configurations, then the shape matrix: all of it when
    ``shapes`` is "full", else one case of each kind of SAMPLE_KINDS (drawn) and every case of
    ALWAYS_KINDS (the just-past-tile lengths)."""
    groups = _fresh_rotations(draw, "rope.apply")
    return groups + select(shape_matrix(draw), shapes, SAMPLE_KINDS, draw, always=ALWAYS_KINDS)


def fresh_frequencies(draw):
    """Two frequency ladders at a rotary_dim in [4, 256] and an integer base in [500, 10^7]."""
    groups = []
    for k in range(2):
        r, base = 2 * draw.integer(2, 128), draw.integer(500, 10**7)
        test = frequency_test(f"r{r}-base{base}", f"Drawn at run time: inv_freq for rotary_dim {r}, "
                               f"base {base}.", (), draw.integer(1, 2**17))
        groups.append(TestGroupSpec(rope_params(r, base, "half"), (test,)))
    return groups


def fresh_apply_qk(draw):
    """One grouped-query case drawn at run time: a model configuration, 4 or 8 query heads over 1
    or 2 KV heads, 1 to 3 rows of 1 to 4 tokens at positions below 2^17."""
    name = draw.choice(("llama3-d128", "llama2-d128-meta", "gpt-neox-20b"))
    model = MODELS[name]
    b, s = draw.integer(1, 3), draw.integer(1, 4)
    rows = tuple(tuple(draw.integers(0, 2**17 - 1, s)) for _ in range(b))
    heads, kv = draw.choice((4, 8)), draw.choice((1, 2))
    test = QkTest(f"{name}-q{heads}-kv{kv}", f"Drawn at run time: {name}'s configuration, {heads} query heads over "
                  f"{kv} KV head(s), {b} x {s} positions.", model_flags(name) + ("GroupedQuery",
                  LAYOUT_FLAG[model["params"]["layout"]]), rows, heads=heads, kv_heads=kv)
    return [TestGroupSpec(model["params"], (test,), model["source"])]
