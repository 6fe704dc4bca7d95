"""FIRE golden vectors: protocol ``fire.bias``.

Arrays (inputs first): ``q_positions`` [sq], ``k_positions`` [sk] (int64, 0-based), the module's
weights ``c`` [1], ``l_multiplier`` [1], ``w1`` [hidden, 1], ``b1`` [hidden], ``w2`` [H, hidden],
``b2`` [H] (reference.fire's c, L_multiplier, W1, b1, W2, b2; seeded, each exactly representable
in bfloat16 and float16, scaled by powers of two to the ranges nn.Linear initialises: w1, b1 in
[-1, 1), w2, b2 in [-1/4, 1/4); c in [2^-10, 1/8) around the module's 0.1; L_multiplier fixed per
test), and ``expected`` [H, sq, sk] =
MLP_h(psi(i - j) / (psi(max(i, L)) + eps)). Parameters: num_heads, hidden, init_L, eps, causal.
Every value the nearest double to the exact one (reference.fire, golden), certified as faithfully
rounded (a reduction over the hidden units) against oracle.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import mpmath
import numpy as np

from reference import fire
from reference.fire import oracle
from reference.golden.catalog import GroupSpec, TestGroupSpec, TestSpec, VectorProtocol
from reference.golden.inputs import representable_inputs

BIAS = "fire.bias"
FIRE = "https://arxiv.org/abs/2310.04418"
CODE = "https://github.com/mcleish7/arithmetic/blob/55af9d5e/cramming/architectures/embeddings.py"
# Stored role (array names are lower case) -> the weight's name in reference.fire and the adapter.
WEIGHTS = {"c": "c", "l_multiplier": "L_multiplier", "w1": "W1", "b1": "b1", "w2": "W2", "b2": "b2"}
SCALE = {"w1": 0.5, "b1": 0.5, "w2": 0.125, "b2": 0.125, "c": 0.0625}

NOTES = {
    "BelowThreshold": {"bugType": "BASIC", "description": "Every query below L = |L_multiplier * 512|: the "
                       "normalizer is psi(L), the same for every row (progressive interpolation).",
                       "links": [FIRE, CODE]},
    "AboveThreshold": {"bugType": "BASIC", "description": "A query past L (position 4095): the normalizer is "
                       "psi(i), and the key at 0 maps to nearly 1.", "links": [FIRE, CODE]},
    "Threshold": {"bugType": "EDGE_CASE", "description": "A small threshold (L = 4) inside the square: rows "
                  "0..3 share psi(4), rows 4..7 use psi(i); normalizing by psi(i) everywhere, or counting "
                  "positions from 1, changes the rows on one side.", "links": [CODE]},
    "Causal": {"bugType": "BASIC", "description": "Causal attention: keys j <= i are graded.", "links": [CODE]},
    "Symmetric": {"bugType": "FUNCTIONALITY", "description": "Every key graded: psi takes |c (i - j)|, so keys "
                  "after the query get the same distance feature as keys before it.", "links": [CODE]},
}


@dataclass(frozen=True)
class FireTest(TestSpec):
    q_positions: tuple = ()
    k_positions: tuple = ()
    l_multiplier: float = 1.0


def _params(heads, causal=True, hidden=32) -> dict:
    return {"num_heads": heads, "hidden": hidden, "init_L": 512.0, "eps": 1e-6, "causal": causal}


SQUARE = tuple(range(8))
DECODE_Q, DECODE_K = (4095,), (0, 1, 2, 3, 4092, 4093, 4094, 4095)


def groups() -> list[GroupSpec]:
    return [
        GroupSpec(BIAS, "prefill", "Prefill squares 0..7 (below the threshold), 8 and 12 heads.", tuple(
            TestGroupSpec(_params(n), (FireTest(f"heads{n}-square-8", "Queries and keys at positions 0..7, L = 512.",
                                                ("BelowThreshold", "Causal"), SQUARE, SQUARE),))
            for n in (8, 12))),
        GroupSpec(BIAS, "decode", "One query at 4095 (past the threshold), 12 heads.", (TestGroupSpec(
            _params(12), (FireTest("heads12-decode-4095",
                                   "One query at 4095 against keys 0..3 and 4092..4095, L = 512.",
                                   ("AboveThreshold", "Causal"), DECODE_Q, DECODE_K),)),)),
        GroupSpec(BIAS, "threshold", "L = 4 inside the prefill square, causal and bidirectional, 8 heads.", (
            TestGroupSpec(_params(8), (FireTest("causal-square-8", "Positions 0..7 with L_multiplier 2^-7 (L = 4).",
                                                ("Threshold", "Causal"), SQUARE, SQUARE, 2.0**-7),)),
            TestGroupSpec(_params(8, causal=False), (FireTest(
                "symmetric-square-8", "Positions 0..7 with L = 4, every key graded.", ("Threshold", "Symmetric"),
                SQUARE, SQUARE, 2.0**-7),)))),
    ]


def fresh_bias(draw) -> list:
    """Heads, a threshold (L_multiplier an odd multiple of 2^-k, 3/4096..255/256, so none of the
    stored ones: L from 0.375 to 510), causal or not, and positions below 2^16 (one draw in two
    below 600, around the threshold)."""
    n, causal = draw.choice((8, 12, 16)), draw.choice((True, False))
    lm = (2 * draw.integer(1, 127) + 1) / 2.0 ** draw.integer(8, 12)
    start = draw.choice((draw.integer(0, 600), draw.integer(0, 2**16)))
    q = tuple(sorted(draw.integers(start, start + 32, draw.integer(1, 4))))
    k = tuple(sorted(draw.integers(max(0, start - 32), start + 32, draw.integer(1, 6))))
    return [TestGroupSpec(_params(n, causal), (FireTest(
        "drawn", f"Drawn at run time: {n} heads, L_multiplier {lm}, queries {q}, keys {k}.", (), q, k, lm),))]


def build_bias(case_id, params, test):
    n, hidden = params["num_heads"], params["hidden"]
    shapes = {"c": (1,), "w1": (hidden, 1), "b1": (hidden,), "w2": (n, hidden), "b2": (n,)}
    arrays = {role: representable_inputs(case_id, shape, role) * SCALE[role] for role, shape in shapes.items()}
    arrays["c"] = np.abs(arrays["c"])
    arrays["l_multiplier"] = np.array([test.l_multiplier])
    return {}, {"q_positions": np.array(test.q_positions, dtype=np.int64),
                "k_positions": np.array(test.k_positions, dtype=np.int64), **arrays}


def weights_of(inputs) -> dict:
    w = {name: np.asarray(inputs[role], dtype=np.float64) for role, name in WEIGHTS.items()}
    w["c"], w["L_multiplier"] = float(w["c"].reshape(-1)[0]), float(w["L_multiplier"].reshape(-1)[0])
    return w


def compute_bias(params, inputs, backend):
    return {"expected": fire.bias(inputs["q_positions"], inputs["k_positions"], weights_of(inputs),
                                  init_L=params["init_L"], eps=params["eps"], backend=backend, mode="golden")}


def shapes_bias(params, arrays):
    n, hidden = params["num_heads"], params["hidden"]
    return {"c": (1,), "l_multiplier": (1,), "w1": (hidden, 1), "b1": (hidden,), "w2": (n, hidden), "b2": (n,),
            "expected": (n, arrays["q_positions"].size, arrays["k_positions"].size)}


def exact_bias(params, inputs):
    with mpmath.workprec(200):
        return {"expected": oracle.bias_exact(inputs["q_positions"], inputs["k_positions"],
                                              *(inputs[r] for r in WEIGHTS), params["init_L"], params["eps"])}


PARAMS_SCHEMA = {"type": "object", "additionalProperties": False,
                 "required": ["num_heads", "hidden", "init_L", "eps", "causal"],
                 "properties": {"num_heads": {"type": "integer", "minimum": 1},
                                "hidden": {"type": "integer", "minimum": 1},
                                "init_L": {"type": "number", "exclusiveMinimum": 0},
                                "eps": {"type": "number", "exclusiveMinimum": 0},
                                "causal": {"type": "boolean"}}}

PROTOCOLS = {
    BIAS: VectorProtocol(BIAS, {"q_positions": "int64", "k_positions": "int64", **{r: "float64" for r in WEIGHTS},
                                "expected": "float64"},
                         ("q_positions", "k_positions", *WEIGHTS), PARAMS_SCHEMA, build_bias, compute_bias,
                         shapes_bias, exact_bias, rounding="faithful", fresh=fresh_bias),
}
