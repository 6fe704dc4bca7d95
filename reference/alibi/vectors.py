"""ALiBi golden vectors: protocols ``alibi.slopes`` and ``alibi.bias``.

``alibi.slopes``: ``expected`` [n] for the head counts real models use (powers of two and BLOOM's
or others' non-powers 12, 20, 40, 80, 96). ``alibi.bias``: ``q_positions`` [sq], ``k_positions``
[sk] (int64), ``expected`` [h, sq, sk] = -m_h (i - j) (causal) or -m_h |i - j| (symmetric). Every
value correctly rounded (reference.alibi, golden) and certified against oracle.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import mpmath
import numpy as np

from reference import alibi
from reference.alibi import oracle
from reference.golden.catalog import GroupSpec, TestGroupSpec, TestSpec, VectorProtocol

SLOPES, BIAS = "alibi.slopes", "alibi.bias"
ALIBI = "https://arxiv.org/abs/2108.12409"
FAIRSEQ = "https://github.com/ofirpress/attention_with_linear_biases/blob/master/fairseq/models/transformer.py"

NOTES = {
    "PowerOfTwo": {"bugType": "BASIC", "description": "A power-of-two head count: m_k = 2^(-8k/n), a geometric "
                   "sequence.", "links": [ALIBI, FAIRSEQ]},
    "NonPowerOfTwo": {"bugType": "EDGE_CASE", "description": "A head count that is not a power of two (BLOOM's "
                      "12 and 96 heads, 20, 40, 80): the slopes of the power below, then every other slope of "
                      "twice it. The plain 2^(-8k/n) formula is wrong here.", "links": [FAIRSEQ]},
    "Causal": {"bugType": "BASIC", "description": "Causal bias -m (i - j) for j <= i; entries above the diagonal "
               "are masked and not graded; a per-row constant (m j, as fairseq adds) grades equal.",
               "links": [ALIBI, FAIRSEQ]},
    "Symmetric": {"bugType": "FUNCTIONALITY", "description": "Bidirectional bias -m |i - j| (the paper's README, "
                  "issue 5): a causal-style m j here varies along each row and changes the softmax.",
                  "links": [ALIBI]},
    "ModelConfig": {"bugType": "FUNCTIONALITY", "description": "A released model's head count, context and "
                    "masking (the zoo's record: reference/zoo/models/), so a port of that model is graded on its "
                    "own configuration.", "links": [FAIRSEQ]},
}


@dataclass(frozen=True)
class AlibiTest(TestSpec):
    q_positions: tuple = ()
    k_positions: tuple = ()


def groups() -> list[GroupSpec]:
    heads = [8, 12, 16, 20, 32, 40, 64, 80, 96]
    slope_tests = tuple(TestGroupSpec({"num_heads": n, "causal": True}, (AlibiTest(
        f"heads-{n}", f"The {n} slopes of a {n}-head model.",
        ("PowerOfTwo",) if n & (n - 1) == 0 else ("NonPowerOfTwo",)),)) for n in heads)
    return [
        GroupSpec(SLOPES, "head-counts", "Slopes for the head counts of real models.", slope_tests),
        GroupSpec(BIAS, "causal", "Causal bias for 8 and 12 heads.", tuple(TestGroupSpec(
            {"num_heads": n, "causal": True}, (
                AlibiTest(f"heads{n}-square-8", "Queries and keys at positions 0..7.", ("Causal", flag),
                          tuple(range(8)), tuple(range(8))),
                AlibiTest(f"heads{n}-decode-4095", "One query at 4095 against keys 0..3 and 4092..4095.",
                          ("Causal", flag), (4095,), (0, 1, 2, 3, 4092, 4093, 4094, 4095)),
            )) for n, flag in ((8, "PowerOfTwo"), (12, "NonPowerOfTwo")))),
        GroupSpec(BIAS, "symmetric", "Bidirectional bias for 16 heads.", (TestGroupSpec(
            {"num_heads": 16, "causal": False}, (
                AlibiTest("square-8", "Queries and keys at positions 0..7, |i - j|.", ("Symmetric", "PowerOfTwo"),
                          tuple(range(8)), tuple(range(8))),
            )),)),
    ]


def fresh_slopes(draw) -> list:
    n = draw.integer(1, 128)
    return [TestGroupSpec({"num_heads": n, "causal": True}, (AlibiTest(f"heads-{n}", f"Drawn at run time: {n} heads.", ()),))]


def fresh_bias(draw) -> list:
    n, start = draw.choice((8, 12, 16, 24, 32)), draw.integer(0, 2**20)
    q = tuple(sorted(draw.integers(start, start + 64, draw.integer(1, 4))))
    k = tuple(sorted(draw.integers(start, start + 64, draw.integer(1, 6))))
    causal = draw.choice((True, False))
    return [TestGroupSpec({"num_heads": n, "causal": causal}, (AlibiTest(
        "drawn", f"Drawn at run time: {n} heads, queries {q}, keys {k}.", (), q, k),))]


def build_slopes(case_id, params, test):
    return {}, {}


def compute_slopes(params, inputs, backend):
    return {"expected": alibi.slopes(params["num_heads"], mode="golden")}


def build_bias(case_id, params, test):
    return {}, {"q_positions": np.array(test.q_positions, dtype=np.int64),
                "k_positions": np.array(test.k_positions, dtype=np.int64)}


def compute_bias(params, inputs, backend):
    return {"expected": alibi.bias(params["num_heads"], inputs["q_positions"], inputs["k_positions"],
                                   causal=params["causal"], backend=backend, mode="golden")}


def shapes_slopes(params, arrays):
    return {"expected": (params["num_heads"],)}


def shapes_bias(params, arrays):
    return {"expected": (params["num_heads"], arrays["q_positions"].size, arrays["k_positions"].size)}


def exact_slopes(params, inputs):
    with mpmath.workprec(200):
        return {"expected": np.array(oracle.slopes_exact(params["num_heads"]), dtype=object)}


def exact_bias(params, inputs):
    with mpmath.workprec(200):
        return {"expected": oracle.bias_exact(params["num_heads"], inputs["q_positions"], inputs["k_positions"],
                                              params["causal"])}


PARAMS_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["num_heads", "causal"],
                 "properties": {"num_heads": {"type": "integer", "minimum": 1}, "causal": {"type": "boolean"}}}

PROTOCOLS = {
    SLOPES: VectorProtocol(SLOPES, {"expected": "float64"}, (), PARAMS_SCHEMA, build_slopes, compute_slopes,
                           shapes_slopes, exact_slopes, fresh=fresh_slopes),
    BIAS: VectorProtocol(BIAS, {"q_positions": "int64", "k_positions": "int64", "expected": "float64"},
                         ("q_positions", "k_positions"), PARAMS_SCHEMA, build_bias, compute_bias, shapes_bias,
                         exact_bias, fresh=fresh_bias),
}
