"""Transformer-XL golden vectors: protocol ``transformer_xl.score``.

Arrays (inputs first): ``q`` [qlen, n_head, d_head], ``k`` [qlen + mlen, n_head, d_head] (mlen
memory slots first), ``u``, ``v`` [n_head, d_head] (``r_w_bias``, ``r_r_bias``), ``r_weight``
[n_head * d_head, d_model] (``r_net.weight``), each seeded by the case id and exactly representable
in bfloat16 and float16 (q, k in [-2, 2); u, v scaled by 1/2, r_weight by 1/4), and ``expected``
[n_head, qlen, qlen + mlen] = ((q_i + u) . k_j + (q_i + v) . r_(i+mlen-j)) / sqrt(d_head)
(reference.transformer_xl). Entries j > i + mlen are masked (not graded; stored at the negative
distance). Parameters: n_head, d_head, d_model, qlen, mlen, clamp_len. Every value computed at
200 bits and rounded once, certified as faithfully rounded (a reduction) against oracle.py.

A case at a model's full shape (reference.transformer_xl.model_cases: Transformer-XL's 16 heads of
64, d_model 1024, 1600 memory slots) grades a subgrid: parameters ``heads``, ``rows`` (queries) and
``keys`` (indices), ``expected`` [len(heads), len(rows), len(keys)] (reference.transformer_xl
.score_entries); the adapter still computes every score. Its inputs are named by their seed, not
stored (``inputs_from`` "seed", ``inputs_seed``, ``inputs_sha256``; reference.golden.seeded): the stored
input arrays are empty, shape (0,), and ``inputs_of`` derives them.
"""

from __future__ import annotations

from dataclasses import dataclass

import mpmath
import numpy as np

from reference import transformer_xl
from reference.golden.catalog import GroupSpec, TestGroupSpec, TestSpec, VectorProtocol
from reference.golden.inputs import representable_inputs
from reference.golden.seeded import Seeded
from reference.transformer_xl import oracle

SCORE = "transformer_xl.score"
PAPER = "https://arxiv.org/abs/1901.02860"
CODE = "https://github.com/kimiyoung/transformer-xl/blob/44781ed2/pytorch/mem_transformer.py"
SCALE = {"q": 1.0, "k": 1.0, "u": 0.5, "v": 0.5, "r_weight": 0.25}
INPUTS = tuple(SCALE)
SEEDED = Seeded("inputs")  # a model's case: the inputs named by their seed

NOTES = {
    "NoMemory": {"bugType": "BASIC", "description": "A first segment without memory (mlen = 0): keys j <= i are "
                 "graded, at distances i - j.", "links": [PAPER, CODE]},
    "Memory": {"bugType": "BASIC", "description": "A segment after mlen cached memory slots: key j of the "
               "klen = qlen + mlen keys sits at distance i + mlen - j from query i; the relative shift must "
               "line up the distances klen - 1 .. 0 with the keys.", "links": [PAPER, CODE]},
    "LongMemory": {"bugType": "EDGE_CASE", "description": "More memory than queries (mlen > qlen): an "
                   "off-by-one in the shift or the pos_seq shows on every row.", "links": [CODE]},
    "Clamped": {"bugType": "EDGE_CASE", "description": "clamp_len > 0: distances past clamp_len share R at "
                "clamp_len (the reference code's pos_seq.clamp_(max=clamp_len)).", "links": [CODE]},
    "ModelConfig": {"bugType": "FUNCTIONALITY", "description": "A released model's shape and configuration "
                    "(transfo-xl-wt103: 16 heads of 64, d_model 1024, a 128-token segment after 1600 memory slots, "
                    "clamp_len 1000). The adapter computes every score; a subgrid of heads, queries and keys is "
                    "graded, and the inputs are named by their seed instead of stored.",
                    "links": [PAPER, CODE, "https://huggingface.co/transfo-xl/transfo-xl-wt103/blob/main/config.json"]},
    "MaskedNotGraded": {"bugType": "FUNCTIONALITY", "description": "Entries j > i + mlen are masked in "
                        "attention: any value there (the shift's leftovers, -inf) is accepted.", "links": [CODE]},
}


@dataclass(frozen=True)
class ScoreTest(TestSpec):
    """qlen queries after mlen memory slots; ``heads``, ``rows`` (queries) and ``keys``: the graded
    subgrid (empty: all), for a case at a model's full shape (reference.transformer_xl.model_cases)."""

    qlen: int = 4
    mlen: int = 0
    heads: tuple = ()
    rows: tuple = ()
    keys: tuple = ()


def _params(n_head, d_head, d_model, clamp_len=0) -> dict:
    return {"n_head": n_head, "d_head": d_head, "d_model": d_model, "clamp_len": clamp_len}


def groups() -> list[GroupSpec]:
    return [
        GroupSpec(SCORE, "no-memory", "A first segment of 4 queries, no memory.", (
            TestGroupSpec(_params(2, 8, 16), (ScoreTest(
                "heads2-d8-q4", "2 heads of 8, d_model 16, qlen 4, mlen 0.", ("NoMemory", "MaskedNotGraded"), 4, 0),),
                PAPER),
            TestGroupSpec(_params(4, 16, 32), (ScoreTest(
                "heads4-d16-q4", "4 heads of 16, d_model 32, qlen 4, mlen 0.", ("NoMemory", "MaskedNotGraded"),
                4, 0),), PAPER),
        )),
        GroupSpec(SCORE, "memory", "Segments after cached memory: (qlen, mlen) = (4, 4) and (3, 5).", (
            TestGroupSpec(_params(4, 8, 32), (
                ScoreTest("heads4-d8-q4-m4", "4 heads of 8, d_model 32, qlen 4 after 4 memory slots.",
                          ("Memory", "MaskedNotGraded"), 4, 4),
                ScoreTest("heads4-d8-q3-m5", "4 heads of 8, d_model 32, qlen 3 after 5 memory slots.",
                          ("Memory", "LongMemory", "MaskedNotGraded"), 3, 5),
            ), CODE),
            TestGroupSpec(_params(2, 16, 32), (
                ScoreTest("heads2-d16-q3-m5", "2 heads of 16, d_model 32, qlen 3 after 5 memory slots.",
                          ("Memory", "LongMemory", "MaskedNotGraded"), 3, 5),
            ), CODE),
        )),
        GroupSpec(SCORE, "clamp", "clamp_len 2 with 4 queries after 4 memory slots.", (
            TestGroupSpec(_params(2, 8, 16, clamp_len=2), (ScoreTest(
                "heads2-d8-q4-m4-clamp2", "Distances 3..7 use R at 2.", ("Memory", "Clamped", "MaskedNotGraded"),
                4, 4),), CODE),
        )),
    ]


def fresh_score(draw) -> list:
    """Heads, head width and d_model from the small range of the stored cases, qlen 1..6, mlen
    0..8, and clamp_len 0 (two draws in three) or 1..6."""
    n_head, d_head, d_model = draw.choice((1, 2, 3, 4)), draw.choice((4, 8, 16)), draw.choice((8, 16, 32))
    qlen, mlen = draw.integer(1, 6), draw.integer(0, 8)
    clamp = draw.choice((0, 0, draw.integer(1, 6)))
    return [TestGroupSpec(_params(n_head, d_head, d_model, clamp), (ScoreTest(
        "drawn", f"Drawn at run time: {n_head} heads of {d_head}, d_model {d_model}, qlen {qlen}, mlen {mlen}, "
                 f"clamp_len {clamp}.", (), qlen, mlen),))]


def _shapes(params) -> dict:
    n, d, dm = params["n_head"], params["d_head"], params["d_model"]
    qlen, klen = params["qlen"], params["qlen"] + params["mlen"]
    graded = (len(params.get("heads", range(n))), len(params.get("rows", range(qlen))),
              len(params.get("keys", range(klen))))
    return {"q": (qlen, n, d), "k": (klen, n, d), "u": (n, d), "v": (n, d), "r_weight": (n * d, dm),
            "expected": graded}


def subset(params) -> dict:
    """{"heads", "rows", "keys"}: the graded subgrid's indices (None: all)."""
    return {name: params.get(name) for name in ("heads", "rows", "keys")}


def inputs_of(params, arrays) -> dict:
    """The case's inputs, stored or named by their seed (reference.golden.seeded)."""
    return SEEDED.inputs_of(params, arrays, _shapes(params), SCALE)


def build_score(case_id, params, test):
    extra = {"qlen": test.qlen, "mlen": test.mlen}
    for name in ("heads", "rows", "keys"):
        if getattr(test, name):
            extra[name] = [int(x) for x in getattr(test, name)]
    full = {**params, **extra}
    shapes = _shapes(full)
    inputs = {role: representable_inputs(case_id, shapes[role], role) * SCALE[role] for role in INPUTS}
    sizes = {"heads": params["n_head"], "rows": test.qlen, "keys": test.qlen + test.mlen}
    for name, size in sizes.items():
        picked = extra.get(name, ())
        if len(set(picked)) != len(picked) or not all(0 <= x < size for x in picked):
            raise ValueError(f"{case_id}: {name} must be distinct indices below {size}, got {list(picked)}")
    if not np.any(np.asarray(extra.get("keys", range(sizes["keys"])))[None, :]
                  <= np.asarray(extra.get("rows", range(test.qlen)))[:, None] + test.mlen):
        raise ValueError(f"{case_id}: every graded entry is masked (key j > query i + mlen)")
    if SEEDED.is_seeded(params):  # a model's case: the inputs named by their seed, not stored
        extra.update(SEEDED.named(case_id, inputs, INPUTS))
        inputs = {role: np.empty((0,)) for role in INPUTS}
    return extra, inputs


def compute_score(params, inputs, backend):
    inputs = inputs_of(params, inputs)
    config = dict(mlen=params["mlen"], d_model=params["d_model"], clamp_len=params["clamp_len"])
    if any(v is not None for v in subset(params).values()):
        return {"expected": transformer_xl.score_entries(*(inputs[r] for r in INPUTS), **config, **subset(params))}
    return {"expected": transformer_xl.score(*(inputs[r] for r in INPUTS), **config, backend=backend, mode="golden")}


def shapes_score(params, arrays):
    shapes = _shapes(params)
    if SEEDED.is_seeded(params):
        shapes.update({role: (0,) for role in INPUTS})
    return shapes


def exact_score(params, inputs):
    inputs = inputs_of(params, inputs)
    with mpmath.workprec(200):
        return {"expected": oracle.score_exact(*(inputs[r] for r in INPUTS), params["mlen"], params["d_model"],
                                               params["clamp_len"], **subset(params))}


PARAMS_SCHEMA = {"type": "object", "additionalProperties": False,
                 "required": ["n_head", "d_head", "d_model", "qlen", "mlen", "clamp_len"],
                 "properties": {"n_head": {"type": "integer", "minimum": 1},
                                "d_head": {"type": "integer", "minimum": 1},
                                "d_model": {"type": "integer", "minimum": 2, "multipleOf": 2},
                                "qlen": {"type": "integer", "minimum": 1},
                                "mlen": {"type": "integer", "minimum": 0},
                                "clamp_len": {"type": "integer", "minimum": 0},
                                # The graded subgrid of a case at a model's full shape (absent: all).
                                "heads": {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 0}},
                                "rows": {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 0}},
                                "keys": {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 0}},
                                # Its inputs named by a seed, not stored (reference.golden.seeded).
                                **SEEDED.schema()["properties"]},
                 "dependentRequired": SEEDED.schema()["dependentRequired"]}

PROTOCOLS = {
    SCORE: VectorProtocol(SCORE, {**{r: "float64" for r in INPUTS}, "expected": "float64"}, INPUTS, PARAMS_SCHEMA,
                          build_score, compute_score, shapes_score, exact_score, rounding="faithful", named=inputs_of,
                          fresh=fresh_score),
}
