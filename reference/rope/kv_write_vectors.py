"""Golden vectors of ``rope.kv_write``: RoPE fused with the paged KV-cache write (a serving step).

A case is one step of a serving engine over a packed (THD) batch: some sequences prefill a chunk,
others decode one token, and the batch may end with padding tokens (slot -1). Arrays:

- ``q`` [t, heads, head_dim], ``k`` and ``v`` [t, kv_heads, head_dim]: seeded by the case id,
  exactly representable in bfloat16 and float16;
- ``positions`` int64 [t]: each token's position in its sequence (0 for padding);
- ``slot_mapping`` int64 [t]: each token's cache slot (reference/rope/kv_write.py), -1 for padding;
- ``block_table`` int64 [n, max_blocks]: the sequences' physical blocks in logical order (out of
  order on purpose; the last physical block is never handed out, so a write through slot -1, which
  Python indexing sends to the last slot, always lands on a slot that must keep its sentinel);
- ``q_expected`` [t, heads, head_dim] and ``k_expected`` [t, kv_heads, head_dim]: reference.rope
  .apply of q and k at the positions, golden mode (correctly rounded, certified against
  reference.rope.oracle like rope.apply's). The value cache must hold v itself (a copy), which is
  not stored again.

Parameters: RoPE's (head_dim, rotary_dim, base, layout, scaling None, seq_len) plus ``block_size``
and ``num_blocks``. Registered in reference/rope/vectors/ (PROTOCOLS, groups(), NOTES).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reference import rope
from reference.golden.catalog import GroupSpec, TestGroupSpec, TestSpec, VectorProtocol
from reference.golden.inputs import representable_inputs, uniform01
from reference.rope import oracle
from reference.rope.kv_write import block_tables, blocks_needed, slot_mapping

NAME = "rope.kv_write"
VLLM_CACHE = "https://github.com/vllm-project/vllm/blob/main/csrc/cache_kernels.cu"
FLASHINFER_PAGE = "https://docs.flashinfer.ai/api/page.html"
FLASHINFER_ROPE = "https://docs.flashinfer.ai/api/rope.html"
XFORMERS_ROPE = "https://github.com/facebookresearch/xformers/blob/main/xformers/ops/rope_padded.py"
SPARE_BLOCKS = 2  # physical blocks no sequence uses (the last one among them): must keep the sentinel

NOTES = {
    "PagedKvWrite": {
        "bugType": "FUNCTIONALITY",
        "description": "rope.kv_write: q and k rotated at their positions, the rotated k and v written into a "
        "paged cache [num_blocks, block_size, kv_heads, head_dim] at slot_mapping[i] = block_table[j, p // "
        "block_size] * block_size + p % block_size, q returned. Every slot outside slot_mapping must keep "
        "the sentinel (NaN) posref filled the caches with.",
        "links": [VLLM_CACHE, FLASHINFER_PAGE, FLASHINFER_ROPE, XFORMERS_ROPE],
    },
    "OutOfOrderBlocks": {
        "bugType": "EDGE_CASE",
        "description": "Block tables whose physical blocks are not in logical order: code that writes token "
        "i to slot i, or swaps block and offset, writes elsewhere.",
        "links": [VLLM_CACHE],
    },
    "PaddingSlots": {
        "bugType": "EDGE_CASE",
        "description": "Padding tokens with slot -1 (a batch padded for CUDA graphs): nothing may be "
        "written for them. Indexing a flattened cache with -1 writes the last slot.",
        "links": [VLLM_CACHE],
    },
    "MixedBatch": {
        "bugType": "FUNCTIONALITY",
        "description": "Chunked prefill and decode tokens in one packed step, each sequence from its own "
        "cache length: positions and slots cross block boundaries.",
        "links": [FLASHINFER_PAGE],
    },
}


@dataclass(frozen=True)
class KvTest(TestSpec):
    """One serving step: sequence j already holds ``starts[j]`` tokens and appends ``new[j]``;
    ``pad`` padding tokens end the batch; ``order`` is the physical block handed out for each
    logical block, sequence after sequence."""

    starts: tuple = ()
    new: tuple = ()
    pad: int = 0
    heads: int = 4
    kv_heads: int = 2
    order: tuple = ()


def _shuffled(name: str, count: int) -> tuple:
    """A fixed permutation of range(count) drawn from the test's name (catalog tests)."""
    return tuple(int(i) for i in np.argsort(uniform01(name, "blocks", count), kind="stable"))


def layout_of(test: KvTest, block_size: int) -> dict:
    """The step's integers: per token its sequence (-1 padding) and position, the block tables,
    the slots, num_blocks and the sequences' bounds in the pack."""
    seq = [j for j, n in enumerate(test.new) for _ in range(n)] + [-1] * test.pad
    pos = [s + i for s, n in zip(test.starts, test.new) for i in range(n)] + [0] * test.pad
    lengths = [s + n for s, n in zip(test.starts, test.new)]
    used = sum(blocks_needed(n, block_size) for n in lengths)
    num_blocks = used + SPARE_BLOCKS
    order = test.order or _shuffled(test.name, num_blocks - 1)
    table = block_tables(lengths, block_size, order[:used])
    return {"sequence": np.array(seq, dtype=np.int64), "positions": np.array(pos, dtype=np.int64),
            "block_table": table, "slot_mapping": slot_mapping(table, seq, pos, block_size),
            "num_blocks": num_blocks, "cu_seqlens": [0] + np.cumsum(test.new).tolist()}


def build(case_id: str, params: dict, test: KvTest):
    """(seq_len, num_blocks, cu_seqlens; {q, k, v seeded by the case id (roles "q", "k", "v"),
    positions, slot_mapping, block_table})."""
    lay = layout_of(test, params["block_size"])
    t, d = lay["positions"].size, params["head_dim"]
    inputs = {"q": representable_inputs(case_id, (t, test.heads, d), role="q"),
              "k": representable_inputs(case_id, (t, test.kv_heads, d), role="k"),
              "v": representable_inputs(case_id, (t, test.kv_heads, d), role="v"),
              "positions": lay["positions"], "slot_mapping": lay["slot_mapping"], "block_table": lay["block_table"]}
    return {"seq_len": int(lay["positions"].max()) + 1, "num_blocks": lay["num_blocks"],
            "cu_seqlens": lay["cu_seqlens"]}, inputs


def _rotated(params: dict, x, positions, backend: str) -> np.ndarray:
    out = rope.apply(np.asarray(x)[None], np.asarray(positions)[None], rotary_dim=params["rotary_dim"],
                     base=params["base"], layout=params["layout"], backend=backend, mode="golden")
    return np.asarray(out, dtype=np.float64)[0]


def compute(params: dict, inputs: dict, backend: str) -> dict:
    """``q_expected``, ``k_expected``: reference.rope.apply of q and k at the positions (golden)."""
    return {f"{role}_expected": _rotated(params, inputs[role], inputs["positions"], backend) for role in ("q", "k")}


def shapes(params: dict, arrays: dict) -> dict:
    pos = arrays["positions"]
    if pos.ndim != 1:
        return {"positions": ("t",)}
    t, d = pos.size, params["head_dim"]
    out = {"slot_mapping": (t,)}
    for role, heads_of in (("q", "q"), ("k", "k"), ("v", "k")):
        a = arrays[heads_of]
        out[role] = (t, a.shape[1] if a.ndim == 3 else "heads", d)
    out["q_expected"], out["k_expected"] = out["q"], out["k"]
    return out


def exact(params: dict, inputs: dict) -> dict:
    pos = np.asarray(inputs["positions"])[None]
    return {f"{role}_expected": oracle.apply_exact(np.asarray(inputs[role])[None], pos, params["rotary_dim"],
                                                   params["base"], params["layout"])[0] for role in ("q", "k")}


def _params(head_dim, rotary_dim, base, layout, block_size) -> dict:
    return {"head_dim": head_dim, "rotary_dim": rotary_dim, "base": float(base), "layout": layout,
            "scaling": None, "block_size": block_size}


CONFIGS = {
    # name: (params, heads, kv_heads, why)
    "d64-bs16": (_params(64, 64, 5e5, "half", 16), 8, 2, "head 64, base 5e5, half pairs, block_size 16, "
                 "8 query heads over 2 KV heads"),
    "d32-bs4-interleaved": (_params(32, 32, 1e4, "interleaved", 4), 6, 2, "head 32, base 1e4, interleaved "
                            "pairs, block_size 4, 6 query heads over 2 KV heads"),
    "d64-r32-bs16-mqa": (_params(64, 32, 1e4, "half", 16), 4, 1, "head 64 with rotary_dim 32 (partial), "
                         "block_size 16, 4 query heads over one KV head"),
}


def _tests(config: str, heads: int, kv: int, block_size: int) -> tuple:
    flags = ("PagedKvWrite", "OutOfOrderBlocks")
    b = block_size
    steps = (
        ("chunked-prefill", (b - 3, 0), (6, 5), 2, "sequence 0 continues from {s0} cached tokens with 6 new "
         "ones (crossing a block boundary), sequence 1 prefills 5; then 2 padding tokens"),
        ("decode-b5", (3 * b - 1, 0, b, b - 1, 8 * b + 2), (1, 1, 1, 1, 1), 3, "5 sequences decode one token "
         "each at positions {pos} (block boundaries on both sides, position 0); then 3 padding tokens"),
        ("mixed", (0, 2 * b + 5, 1), (9, 1, 4), 1, "sequence 0 prefills 9 tokens, sequence 1 decodes at {s1}, "
         "sequence 2 appends 4 after 1 cached; one padding token"),
    )
    out = []
    for name, starts, new, pad, why in steps:
        why = why.format(s0=starts[0], s1=starts[1], pos=list(starts))
        extra = ("PaddingSlots",) if pad else ()
        out.append(KvTest(f"{config}-{name}", f"One serving step ({why}): q and k rotated at their positions, "
                          "k and v written at their slots of a paged cache whose blocks are out of order.",
                          flags + extra + (("MixedBatch",) if len(set(new)) > 1 else ()), starts, new, pad,
                          heads, kv))
    return tuple(out)


def groups() -> list[GroupSpec]:
    """rope.kv_write/paged: three configurations (CONFIGS) x three steps (chunked prefill, batched
    decode, mixed), 6 to 20 tokens each."""
    test_groups = tuple(TestGroupSpec(params, _tests(name, heads, kv, params["block_size"]), VLLM_CACHE)
                        for name, (params, heads, kv, _) in CONFIGS.items())
    return [GroupSpec(NAME, "paged", "RoPE fused with the paged KV-cache write: chunked prefill, batched decode "
                      "and mixed steps with padding, block tables out of order, GQA and MQA, both pair layouts.",
                      test_groups)]


def _draw_order(draw, count: int) -> tuple:
    """A permutation of range(count) from the run's draw (Fisher-Yates)."""
    order = list(range(count))
    for i in range(count - 1, 0, -1):
        j = draw.integer(0, i)
        order[i], order[j] = order[j], order[i]
    return tuple(order)


def fresh(draw) -> list:
    """One step drawn at run time: a configuration, 1 to 4 sequences each continuing from 0 to 300
    cached tokens with 1 to 5 new ones, 0 to 3 padding tokens, blocks in a drawn order."""
    name = draw.choice(sorted(CONFIGS))
    params, heads, kv, _ = CONFIGS[name]
    n = draw.integer(1, 4)
    starts = tuple(draw.integers(0, 300, n))
    new = tuple(draw.integers(1, 5, n))
    pad = draw.integer(0, 3)
    b = params["block_size"]
    used = sum(blocks_needed(s + k, b) for s, k in zip(starts, new))
    test = KvTest("drawn-step", f"Drawn at run time ({name}): {n} sequence(s) continuing from {list(starts)} with "
                  f"{list(new)} new token(s), {pad} padding token(s), block_size {b}.",
                  ("PagedKvWrite", "OutOfOrderBlocks") + (("PaddingSlots",) if pad else ()), starts, new, pad,
                  heads, kv, _draw_order(draw, used + SPARE_BLOCKS - 1))
    return [TestGroupSpec(params, (test,))]


SCHEMA = {
    "type": "object", "additionalProperties": False,
    "required": ["head_dim", "rotary_dim", "base", "layout", "scaling", "seq_len", "block_size", "num_blocks",
                 "cu_seqlens"],
    "properties": {
        "head_dim": {"type": "integer", "minimum": 2, "multipleOf": 2},
        "rotary_dim": {"type": "integer", "minimum": 2, "multipleOf": 2},
        "base": {"type": "number", "exclusiveMinimum": 0},
        "layout": {"enum": ["half", "interleaved"]},
        "scaling": {"type": "null"},
        "seq_len": {"type": "integer", "minimum": 0},
        "block_size": {"type": "integer", "minimum": 1},
        "num_blocks": {"type": "integer", "minimum": 1},
        "cu_seqlens": {"type": "array", "items": {"type": "integer", "minimum": 0}},
    },
}

PROTOCOL = VectorProtocol(
    NAME, {"q": "float64", "k": "float64", "v": "float64", "positions": "int64", "slot_mapping": "int64",
           "block_table": "int64", "q_expected": "float64", "k_expected": "float64"},
    ("q", "k", "v", "positions", "slot_mapping", "block_table"), SCHEMA, build, compute, shapes, exact,
    fresh=fresh)
