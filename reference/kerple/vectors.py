"""KERPLE golden vectors: protocol ``kerple.bias``.

Arrays: ``q_positions`` [sq], ``k_positions`` [sk] (int64), ``expected`` [h, sq, sk] =
-r1_h log(1 + r2_h |i - j|) (variant log) or -r1_h |i - j|^r2_h (variant power) after the code's
clamps. Parameters: variant, r1 and r2 (one number per head, as the trained model holds them) and
causal (graded keys j <= i). Every value correctly rounded (reference.kerple, golden) and
certified against oracle.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import mpmath
import numpy as np

from reference import kerple
from reference.golden.catalog import GroupSpec, TestGroupSpec, TestSpec, VectorProtocol
from reference.kerple import oracle

BIAS = "kerple.bias"
KERPLE = "https://arxiv.org/abs/2205.09921"
CODE = "https://github.com/chijames/KERPLE/blob/25be3d71/megatron/mpu/layers.py"

NOTES = {
    "Log": {"bugType": "BASIC", "description": "The logarithmic variant -r1 log(1 + r2 |i - j|) "
            "(ParallelKerpleLog).", "links": [KERPLE, CODE]},
    "Power": {"bugType": "BASIC", "description": "The power variant -r1 |i - j|^r2 (ParallelKerplePower).",
              "links": [KERPLE, CODE]},
    "Causal": {"bugType": "BASIC", "description": "Causal attention: keys j <= i are graded (the code's "
               "tril(i - j)); entries above the diagonal are masked by the caller.", "links": [CODE]},
    "Symmetric": {"bugType": "FUNCTIONALITY", "description": "Bidirectional attention: every key is graded, "
                  "the bias depends on |i - j| and decays both ways.", "links": [KERPLE]},
    "Decode": {"bugType": "FUNCTIONALITY", "description": "One query at position 4095 against the first and "
               "last keys: distances up to 4095, where log1p and pow work on large arguments.",
               "links": [CODE]},
    "Clamp": {"bugType": "EDGE_CASE", "description": "Parameters outside the range the code clamps them to "
              "(log: r1, r2 >= 1e-2; power: r1 >= 1e-2, r2 in [1e-2, 2]): the expected bias uses the clamped "
              "values, as the code does on every forward pass.", "links": [CODE]},
}


@dataclass(frozen=True)
class KerpleTest(TestSpec):
    q_positions: tuple = ()
    k_positions: tuple = ()


def _heads(values) -> list:
    return [float(v) for v in values]


# Trained-looking per-head parameters with decimal digits (none exact in binary, so converting
# them to the dtype under test rounds them, as a checkpoint's would be).
LOG_R1 = _heads([0.37, 1.21, 0.58, 1.94, 0.83, 0.12, 1.47, 0.66, 1.05, 0.29, 1.73, 0.91])
LOG_R2 = _heads([0.43, 0.07, 0.86, 0.31, 0.58, 0.95, 0.14, 0.72, 0.22, 0.49, 0.03, 0.67])
POW_R1 = _heads([0.21, 0.64, 0.09, 0.88, 0.35, 0.52, 0.17, 0.73])
POW_R2 = _heads([0.61, 1.37, 0.28, 1.83, 0.95, 0.47, 1.12, 0.05])
# Outside the clamp range: r1 or r2 below 1e-2 (and a power exponent above 2).
CLAMP_LOG_R1 = _heads([0.004, 0.83, -0.25, 1.21, 0.37, 0.0015, 0.66, 1.05])
CLAMP_LOG_R2 = _heads([0.43, 0.0005, 0.31, -0.002, 0.0031, 0.58, 0.007, 0.22])
CLAMP_POW_R1 = _heads([0.003, 0.64, 0.52, 0.0002, 0.35, 0.17, 0.88, 0.21])
CLAMP_POW_R2 = _heads([0.61, 2.75, 0.004, 1.37, 3.5, 0.0007, 2.2, 0.95])

SQUARE = tuple(range(8))
DECODE_Q, DECODE_K = (4095,), (0, 1, 2, 3, 4092, 4093, 4094, 4095)


def _params(variant, r1, r2, causal=True) -> dict:
    return {"variant": variant, "r1": list(r1), "r2": list(r2), "causal": causal}


def _pair(flag, extra=()):
    return (KerpleTest("square-8", "Queries and keys at positions 0..7 (prefill).", (flag, "Causal", *extra),
                       SQUARE, SQUARE),
            KerpleTest("decode-4095", "One query at 4095 against keys 0..3 and 4092..4095.",
                       (flag, "Causal", "Decode", *extra), DECODE_Q, DECODE_K))


def groups() -> list[GroupSpec]:
    return [
        GroupSpec(BIAS, "log-causal", "The log variant, 12 heads, causal.",
                  (TestGroupSpec(_params("log", LOG_R1, LOG_R2), _pair("Log")),)),
        GroupSpec(BIAS, "power-causal", "The power variant, 8 heads, causal.",
                  (TestGroupSpec(_params("power", POW_R1, POW_R2), _pair("Power")),)),
        GroupSpec(BIAS, "symmetric", "Both variants, bidirectional, 8 heads.", (
            TestGroupSpec(_params("log", LOG_R1[:8], LOG_R2[:8], False), (KerpleTest(
                "log-square-8", "Log variant, positions 0..7, |i - j|.", ("Log", "Symmetric"), SQUARE, SQUARE),)),
            TestGroupSpec(_params("power", POW_R1, POW_R2, False), (KerpleTest(
                "power-square-8", "Power variant, positions 0..7, |i - j|.", ("Power", "Symmetric"),
                SQUARE, SQUARE),)))),
        GroupSpec(BIAS, "clamp", "Parameters outside the clamp range, 8 heads, causal.", (
            TestGroupSpec(_params("log", CLAMP_LOG_R1, CLAMP_LOG_R2), tuple(
                KerpleTest(f"log-{t.name}", t.comment, t.flags, t.q_positions, t.k_positions)
                for t in _pair("Log", ("Clamp",)))),
            TestGroupSpec(_params("power", CLAMP_POW_R1, CLAMP_POW_R2), tuple(
                KerpleTest(f"power-{t.name}", t.comment, t.flags, t.q_positions, t.k_positions)
                for t in _pair("Power", ("Clamp",)))))),
    ]


def fresh_bias(draw) -> list:
    """A variant, 8 to 16 heads with parameters drawn from the code's initialisation ranges (one in
    four outside the clamp range), and a few positions anywhere below 2^20."""
    variant, n = draw.choice(("log", "power")), draw.choice((8, 12, 16))
    high1, high2 = (200, 100) if variant == "log" else (100, 200)
    r1 = [draw.integer(1, high1) / 100 if draw.integer(0, 3) else draw.integer(-50, 9) / 1000 for _ in range(n)]
    r2 = [draw.integer(1, high2) / 100 if draw.integer(0, 3) else draw.integer(-50, 400) / 1000 for _ in range(n)]
    start = draw.integer(0, 2**20)
    q = tuple(sorted(draw.integers(start, start + 64, draw.integer(1, 4))))
    k = tuple(sorted(draw.integers(start, start + 64, draw.integer(1, 6))))
    causal = draw.choice((True, False))
    return [TestGroupSpec(_params(variant, r1, r2, causal), (KerpleTest(
        "drawn", f"Drawn at run time: {variant}, {n} heads, queries {q}, keys {k}.", (), q, k),))]


def build_bias(case_id, params, test):
    return {}, {"q_positions": np.array(test.q_positions, dtype=np.int64),
                "k_positions": np.array(test.k_positions, dtype=np.int64)}


def compute_bias(params, inputs, backend):
    return {"expected": kerple.bias(inputs["q_positions"], inputs["k_positions"], params["variant"], params["r1"],
                                    params["r2"], backend=backend, mode="golden")}


def shapes_bias(params, arrays):
    return {"expected": (len(params["r1"]), arrays["q_positions"].size, arrays["k_positions"].size)}


def exact_bias(params, inputs):
    with mpmath.workprec(200):
        return {"expected": oracle.bias_exact(params["variant"], params["r1"], params["r2"], inputs["q_positions"],
                                              inputs["k_positions"])}


_PER_HEAD = {"type": "array", "minItems": 1, "items": {"type": "number"}}
PARAMS_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["variant", "r1", "r2", "causal"],
                 "properties": {"variant": {"enum": ["log", "power"]}, "r1": _PER_HEAD, "r2": _PER_HEAD,
                                "causal": {"type": "boolean"}}}

PROTOCOLS = {
    BIAS: VectorProtocol(BIAS, {"q_positions": "int64", "k_positions": "int64", "expected": "float64"},
                         ("q_positions", "k_positions"), PARAMS_SCHEMA, build_bias, compute_bias, shapes_bias,
                         exact_bias, fresh=fresh_bias),
}
