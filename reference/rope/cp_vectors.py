"""Golden vectors of ``rope.cp_positions``: the tokens one context-parallel rank holds of a packed
(THD) batch (reference/rope/cp_positions.py states the rule and its sources).

Arrays: ``cu_seqlens`` int64 [n + 1] (the input) and ``expected`` int64 [t_rank] (the positions,
or pack indices, in the rank's order). Parameters: ``cp_size``, ``rank``, ``split``
("load_balanced" or "contiguous") and ``output`` ("positions" or "indices"). Every stored value is
an integer, certified against ``cp_positions_bruteforce`` (the same answer found token by token
from each token's owner). The catalog draws only valid inputs: every sequence length divisible by
the split's chunk count. Registered in reference/rope/vectors/ (PROTOCOLS, groups(), NOTES).
"""

from __future__ import annotations

from dataclasses import dataclass

import mpmath
import numpy as np

from reference import rope
from reference.golden.catalog import GroupSpec, TestGroupSpec, TestSpec, VectorProtocol
from reference.golden.inputs import representable_inputs
from reference.rope import oracle
from reference.rope.cp_positions import OUTPUTS, SPLITS, chunk_count, cp_positions, cp_positions_bruteforce

PROTOCOL_NAME = "rope.cp_positions"
TE_CP = ("https://github.com/NVIDIA/TransformerEngine/blob/main/transformer_engine/pytorch/attention/"
         "dot_product_attention/context_parallel.py")
MEGATRON_CP = "https://github.com/NVIDIA/Megatron-LM/blob/main/megatron/core/utils.py"
MEGATRON_5243 = "https://github.com/NVIDIA/Megatron-LM/pull/5243"
CP_SIZES = (1, 2, 4, 8)

NOTES = {
    "ContextParallel": {
        "bugType": "FUNCTIONALITY",
        "description": "rope.cp_positions: the tokens a context-parallel rank holds of a packed (THD) batch, "
        "each sequence cut into 2 * cp_size chunks (rank r: chunks r and 2 * cp_size - 1 - r, load-balanced "
        "for causal attention) or cp_size chunks (contiguous); their positions within their sequences, or "
        "their indices in the pack. Graded exactly.",
        "links": [TE_CP, MEGATRON_CP],
    },
    "PackedIndices": {
        "bugType": "KNOWN_BUG",
        "description": "output 'indices': the rank's tokens as indices into the pack (position + the "
        "sequence's offset cu_seqlens[j]), what a per-token table of the whole pack is read with. Megatron-LM "
        "read such a table with the positions, so later sequences reused sequence 0's rows (cu_seqlens "
        "[0, 4, 8], cp_size 2, rank 0: [0, 3, 0, 3] instead of [0, 3, 4, 7]).",
        "links": [MEGATRON_5243],
    },
    "UnequalLengths": {
        "bugType": "EDGE_CASE",
        "description": "Packed sequences of different lengths: each has its own chunk size, so code that "
        "cuts the pack as one sequence, or uses one chunk size for all, fails.",
        "links": [TE_CP],
    },
}


@dataclass(frozen=True)
class CpTest(TestSpec):
    """One rank's view of one packed batch: ``lengths`` of its sequences and the rank."""

    lengths: tuple = ()
    rank: int = 0


def cu_of(lengths) -> np.ndarray:
    """cu_seqlens int64 [n + 1] of the sequence lengths."""
    return np.concatenate([[0], np.cumsum(np.asarray(lengths, dtype=np.int64))]).astype(np.int64)


# The packs, in units of the split's chunk count u (every length a multiple of u): why each exists.
PACKS = {
    "one": ((4,), "one sequence of 4u tokens"),
    "equal": ((1, 1), "two sequences of u tokens each (one token per chunk)"),
    "unequal": ((1, 3, 2), "three sequences of u, 3u and 2u tokens: a chunk size per sequence"),
    "many": ((2, 1, 1, 4, 1, 3), "six sequences of 2u, u, u, 4u, u and 3u tokens"),
}


def _tests(cp_size: int, split: str, output: str) -> tuple:
    unit = chunk_count(cp_size, split)
    tests = []
    for pack, (units, why) in PACKS.items():
        lengths = tuple(unit * k for k in units)
        flags = ("ContextParallel",) + (("PackedIndices",) if output == "indices" else ()) \
            + (("UnequalLengths",) if len(set(lengths)) > 1 else ())
        for rank in range(cp_size):
            tests.append(CpTest(
                f"cp{cp_size}-{pack}-rank{rank}",
                f"cu_seqlens {cu_of(lengths).tolist()} ({why}, u = {unit}), cp_size {cp_size}, rank {rank}: "
                f"the {output} of its tokens under the {split} split.", flags, lengths, rank))
    return tuple(tests)


def _megatron_example() -> TestGroupSpec:
    """Megatron-LM PR #5243's example, both outputs: cu_seqlens [0, 4, 8], cp_size 2, rank 0."""
    tests = []
    for output, answer in (("positions", "[0, 3, 0, 3]"), ("indices", "[0, 3, 4, 7]")):
        tests.append(CpTest(f"megatron-5243-{output}", f"Megatron-LM PR #5243's example: cu_seqlens [0, 4, 8], "
                            f"cp_size 2, rank 0 holds chunks 0 and 3 of each sequence (one token each): {output} "
                            f"{answer}.", ("ContextParallel",) + (("PackedIndices",) if output == "indices" else ()),
                            (4, 4), 0))
    return tests


def groups() -> list[GroupSpec]:
    """rope.cp_positions/<split>-<output>: every pack of PACKS at cp_size 1, 2, 4 and 8, every rank;
    rope.cp_positions/megatron-5243: the PR's worked example."""
    out = [GroupSpec(PROTOCOL_NAME, "megatron-5243", "Megatron-LM PR #5243's example (cu_seqlens [0, 4, 8], "
                     "cp_size 2, rank 0), as positions and as pack indices.", tuple(
                         TestGroupSpec(_params(2, "load_balanced", t.name.rsplit("-", 1)[1]), (t,), MEGATRON_5243)
                         for t in _megatron_example()))]
    for split in SPLITS:
        for output in OUTPUTS:
            out.append(GroupSpec(
                PROTOCOL_NAME, f"{split.replace('_', '-')}-{output}",
                f"The {split} split, {output}: packs of one to six sequences at cp_size {list(CP_SIZES)}, every rank.",
                tuple(TestGroupSpec(_params(cp, split, output), _tests(cp, split, output), TE_CP) for cp in CP_SIZES)))
    return out


def _params(cp_size: int, split: str, output: str) -> dict:
    return {"cp_size": cp_size, "split": split, "output": output}


def build(case_id: str, params: dict, test: CpTest):
    """(the rank, {cu_seqlens int64 [n + 1]}) of a test."""
    return {"rank": test.rank}, {"cu_seqlens": cu_of(test.lengths)}


def _kwargs(params: dict) -> dict:
    return {"cp_size": params["cp_size"], "rank": params["rank"], "split": params["split"], "output": params["output"]}


def compute(params: dict, inputs: dict, backend: str) -> dict:
    """``expected`` = reference.rope.cp_positions (integers: the same on every backend)."""
    return {"expected": cp_positions(inputs["cu_seqlens"], **_kwargs(params))}


def shapes(params: dict, arrays: dict) -> dict:
    cu = arrays["cu_seqlens"]
    if cu.ndim != 1:
        return {"cu_seqlens": ("n + 1",)}
    return {"expected": (int(cu[-1]) // params["cp_size"],) if cu.size else (0,)}


def exact(params: dict, inputs: dict) -> dict:
    """The token-by-token route (cp_positions_bruteforce) as mpf integers."""
    values = cp_positions_bruteforce(inputs["cu_seqlens"], **_kwargs(params))
    return {"expected": np.array([mpmath.mpf(v) for v in values], dtype=object)}


def fresh(draw) -> list:
    """One case per split drawn at run time: cp_size from 1, 2, 4, 8, a rank, the output, and one to
    five sequences of 1 to 6 chunk counts each (valid inputs only: every length divisible)."""
    out = []
    for split in SPLITS:
        cp = draw.choice(CP_SIZES)
        output = draw.choice(OUTPUTS)
        unit = chunk_count(cp, split)
        lengths = tuple(unit * draw.integer(1, 6) for _ in range(draw.integer(1, 5)))
        rank = draw.integer(0, cp - 1)
        test = CpTest(f"drawn-{split.replace('_', '-')}", f"Drawn at run time: lengths {list(lengths)}, cp_size {cp}, "
                      f"rank {rank}, the {output} under the {split} split.", ("ContextParallel",), lengths, rank)
        out.append(TestGroupSpec(_params(cp, split, output), (test,)))
    return out


PARAMS_SCHEMA = {
    "type": "object", "additionalProperties": False,
    "required": ["cp_size", "rank", "split", "output"],
    "properties": {
        "cp_size": {"type": "integer", "minimum": 1},
        "rank": {"type": "integer", "minimum": 0},
        "split": {"enum": list(SPLITS)},
        "output": {"enum": list(OUTPUTS)},
    },
}

PROTOCOL = VectorProtocol(PROTOCOL_NAME, {"cu_seqlens": "int64", "expected": "int64"}, ("cu_seqlens",),
                          PARAMS_SCHEMA, build, compute, shapes, exact, fresh=fresh)


# --------------------------------------------------------------------------------------------
# rope.cp_apply: the rank's tokens rotated at its positions

APPLY_NAME = "rope.cp_apply"


@dataclass(frozen=True)
class CpApplyTest(CpTest):
    heads: int = 2


def _apply_params(cp_size: int, split: str, layout: str) -> dict:
    return {"head_dim": 64, "rotary_dim": 64, "base": 10000.0, "layout": layout, "scaling": None,
            "cp_size": cp_size, "split": split}


def apply_groups() -> list[GroupSpec]:
    """rope.cp_apply/head64: head 64, base 1e4, both pair layouts; the unequal pack of three
    sequences (u, 3u and 2u tokens, u the chunk count) and a long one (32u then u tokens) at cp_size
    2 and 4, every rank, load-balanced; the contiguous split at cp_size 2."""
    test_groups = []
    for layout in ("half", "interleaved"):
        for cp, split in ((2, "load_balanced"), (4, "load_balanced"), (2, "contiguous")):
            unit = chunk_count(cp, split)
            tests = []
            for pack, lengths in (("unequal", (unit, 3 * unit, 2 * unit)), ("long", (32 * unit, unit))):
                for rank in range(cp):
                    tests.append(CpApplyTest(
                        f"{layout}-{split.replace('_', '-')}-cp{cp}-{pack}-rank{rank}",
                        f"Rank {rank} of {cp} ({split}) rotates its tokens of cu_seqlens {cu_of(lengths).tolist()} "
                        f"at their positions within their sequences ({layout} pairs).",
                        ("ContextParallel",) + (("UnequalLengths",) if len(set(lengths)) > 1 else ()), lengths,
                        rank))
            test_groups.append(TestGroupSpec(_apply_params(cp, split, layout), tuple(tests), TE_CP))
    return [GroupSpec(APPLY_NAME, "head64", "The rank's tokens of a packed batch rotated at their positions, "
                      "head 64, base 1e4, both layouts.", tuple(test_groups))]


def _rank_positions(params: dict, cu) -> np.ndarray:
    return cp_positions(cu, params["cp_size"], params["rank"], params["split"], "positions")


def build_apply(case_id: str, params: dict, test: CpApplyTest):
    """(the rank and seq_len, {x [t_rank, heads, head_dim] seeded by the case id and exactly
    representable in bfloat16 and float16, cu_seqlens int64 [n + 1]})."""
    cu = cu_of(test.lengths)
    t = int(cu[-1]) // params["cp_size"]
    x = representable_inputs(case_id, (t, test.heads, params["head_dim"]))
    return {"rank": test.rank, "seq_len": int(np.diff(cu).max())}, {"x": x, "cu_seqlens": cu}


def compute_apply(params: dict, inputs: dict, backend: str) -> dict:
    """``expected`` [t_rank, heads, head_dim] = reference.rope.apply at the rank's positions,
    golden mode (every value the float64 nearest to the exact rotation)."""
    pos = _rank_positions(params, inputs["cu_seqlens"])
    out = rope.apply(inputs["x"][None], pos[None], rotary_dim=params["rotary_dim"], base=params["base"],
                     layout=params["layout"], backend=backend, mode="golden")
    return {"expected": np.asarray(out, dtype=np.float64)[0]}


def shapes_apply(params: dict, arrays: dict) -> dict:
    cu = arrays["cu_seqlens"]
    if cu.ndim != 1:
        return {"cu_seqlens": ("n + 1",)}
    x = arrays["x"]
    shape = (int(cu[-1]) // params["cp_size"], x.shape[1] if x.ndim == 3 else "heads", params["head_dim"])
    return {"x": shape, "expected": shape}


def exact_apply(params: dict, inputs: dict) -> dict:
    pos = _rank_positions(params, inputs["cu_seqlens"])
    return {"expected": oracle.apply_exact(inputs["x"][None], pos[None], params["rotary_dim"], params["base"],
                                           params["layout"])[0]}


def fresh_apply(draw) -> list:
    """One drawn case: cp_size 2, 4 or 8, a rank, a split, a pair layout, and two to four
    sequences of 1 to 8 chunk counts each."""
    cp, split = draw.choice((2, 4, 8)), draw.choice(SPLITS)
    unit = chunk_count(cp, split)
    lengths = tuple(unit * draw.integer(1, 8) for _ in range(draw.integer(2, 4)))
    rank = draw.integer(0, cp - 1)
    test = CpApplyTest("drawn", f"Drawn at run time: lengths {list(lengths)}, cp_size {cp}, rank {rank}, {split}.",
                       ("ContextParallel",), lengths, rank)
    return [TestGroupSpec(_apply_params(cp, split, draw.choice(("half", "interleaved"))), (test,))]


APPLY_SCHEMA = {
    "type": "object", "additionalProperties": False,
    "required": ["head_dim", "rotary_dim", "base", "layout", "scaling", "seq_len", "cp_size", "rank", "split"],
    "properties": {
        "head_dim": {"type": "integer", "minimum": 2, "multipleOf": 2},
        "rotary_dim": {"type": "integer", "minimum": 2, "multipleOf": 2},
        "base": {"type": "number", "exclusiveMinimum": 0},
        "layout": {"enum": ["half", "interleaved"]},
        "scaling": {"type": "null"},
        "seq_len": {"type": "integer", "minimum": 0},
        "cp_size": {"type": "integer", "minimum": 1},
        "rank": {"type": "integer", "minimum": 0},
        "split": {"enum": list(SPLITS)},
    },
}

APPLY_PROTOCOL = VectorProtocol(APPLY_NAME, {"x": "float64", "cu_seqlens": "int64", "expected": "float64"},
                                ("x", "cu_seqlens"), APPLY_SCHEMA, build_apply, compute_apply, shapes_apply,
                                exact_apply, fresh=fresh_apply)
