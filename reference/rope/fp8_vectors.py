"""Golden vectors of ``rope.apply_qk_fp8``: RoPE on q and k, then quantisation to float8 e4m3 with a
per-tensor scale each (reference/rope/fp8.py: stored = sat(round_e4m3(rope(x) / scale))).

The arrays are rope.apply_qk's: ``q`` [b, s, heads, head_dim], ``k`` [b, s, kv_heads, head_dim],
``positions`` int64 [b, s], and ``q_expected``, ``k_expected``: the float64 rotations (golden mode,
certified against reference.rope.oracle as rope.apply's). The float8 values are not stored: the
grade divides the certified rotation by the case's scale and accepts the e4m3 values around it
(conformance/rope/apply_qk_fp8.py, docs/tolerance.md). Parameters: RoPE's plus ``q_scale`` and
``k_scale`` (each a few significant bits, exactly representable in bfloat16, so that a scale held
in any dtype is the same number). Inputs lie in [-2, 2), so a rotated element is at most 2 sqrt(2)
in magnitude; the scales put the quantised values well inside e4m3's range, past 448 (saturation),
or among its subnormals (below 2**-6).

Registered in reference/rope/vectors/ (PROTOCOLS through ``protocol``, groups(), NOTES).
"""

from __future__ import annotations

from dataclasses import dataclass

from reference.golden.catalog import GroupSpec, TestGroupSpec, VectorProtocol
from reference.rope.vectors.records import QkTest, rope_params

NAME = "rope.apply_qk_fp8"
FLASHINFER_ROPE = "https://docs.flashinfer.ai/api/rope.html"
VLLM_FP8 = "https://docs.vllm.ai/en/latest/features/quantization/quantized_kvcache.html"
OCP_FP8 = "https://www.opencompute.org/documents/ocp-8-bit-floating-point-specification-ofp8-revision-1-0-2023-12-01-pdf-1"
TORCH_AO_SAT = "https://github.com/pytorch/ao/pull/4359"
ROTATED_MAX = 2.0 * 2.0**0.5  # |rotated element| <= sqrt(a^2 + b^2) < 2 sqrt(2) for inputs in [-2, 2)

NOTES = {
    "Float8Quantized": {
        "bugType": "FUNCTIONALITY",
        "description": "rope.apply_qk_fp8: q and k rotated, divided by their per-tensor scales and rounded to "
        "float8 e4m3fn (largest finite 448). Graded with a budget that knows e4m3's rounding: any e4m3 value "
        "between the rounding down of the low end and the rounding up of the high end of the RoPE budget "
        "interval (divided by the scale) passes.",
        "links": [FLASHINFER_ROPE, VLLM_FP8, OCP_FP8],
    },
    "Float8Saturation": {
        "bugType": "EDGE_CASE",
        "description": "Some rotated values divided by the scale exceed 448: they must saturate to +-448. A cast "
        "that does not saturate (torch 2.11's eager cast, ml_dtypes, JAX) gives NaN from 465 up.",
        "links": [TORCH_AO_SAT, OCP_FP8],
    },
    "Float8Subnormal": {
        "bugType": "EDGE_CASE",
        "description": "A large scale puts most quantised values below 2**-6, among e4m3's subnormals (spacing "
        "2**-9); values below 2**-10 round to zero.",
        "links": [OCP_FP8],
    },
}


@dataclass(frozen=True)
class Fp8Test(QkTest):
    """A rope.apply_qk case with the per-tensor scales of q and k."""

    q_scale: float = 1.0
    k_scale: float = 1.0


def _scaled(amax: float) -> float:
    """A scale that maps ROTATED_MAX to about ``amax``, rounded to 3 significant bits (exact in
    bfloat16)."""
    import math

    s = ROTATED_MAX / amax
    e = math.floor(math.log2(s)) - 2
    return round(s / 2.0**e) * 2.0**e


def _tests(tag: str, heads: int, kv: int) -> tuple:
    flags = ("Float8Quantized", "GroupedQuery")
    return (
        Fp8Test(f"{tag}-prefill-in-range", f"Prompt of 6 tokens, {heads} query heads over {kv} KV heads; scales "
                "put every quantised value inside e4m3's range (up to about 300 and 250).", flags + ("Prefill",),
                (tuple(range(6)),), heads=heads, kv_heads=kv, q_scale=_scaled(300.0), k_scale=_scaled(250.0)),
        Fp8Test(f"{tag}-decode-b3-saturating", "Batched decode at 4095, 131071 and 17; scales small enough that "
                "values past 448 must saturate (up to about 950 and 600 before saturation).",
                flags + ("Decode", "BatchedDecode", "Float8Saturation"), ((4095,), (131071,), (17,)), heads=heads,
                kv_heads=kv, q_scale=_scaled(950.0), k_scale=_scaled(600.0)),
        Fp8Test(f"{tag}-subnormal", "Two rows of 4 tokens from 0 and 65533; scales so large that many quantised "
                "values are e4m3 subnormals (below 2**-6) and some round to zero.", flags + ("Float8Subnormal", "RowOffsets"),
                ((0, 1, 2, 3), (65533, 65534, 65535, 65536)), heads=heads, kv_heads=kv, q_scale=_scaled(0.05),
                k_scale=_scaled(0.03)),
    )


CONFIGS = {
    "d64-half": (rope_params(64, 5e5, "half"), 8, 2),
    "d32-interleaved": (rope_params(32, 1e4, "interleaved"), 4, 1),
}


def groups() -> list[GroupSpec]:
    """rope.apply_qk_fp8/e4m3: two configurations (CONFIGS) x three scales (in range, saturating,
    subnormal)."""
    test_groups = tuple(TestGroupSpec(params, _tests(name, heads, kv), FLASHINFER_ROPE)
                        for name, (params, heads, kv) in CONFIGS.items())
    return [GroupSpec(NAME, "e4m3", "RoPE on q and k quantised to float8 e4m3fn with per-tensor scales: in range, "
                      "saturating past 448, and among the subnormals; GQA and MQA, both pair layouts.", test_groups)]


def fresh(draw) -> list:
    """One case drawn at run time: a configuration, 1 to 3 rows of 1 to 4 tokens below 2^17, and
    scales that put the largest quantised value near 0.05, 100, 400 or 900 (saturating)."""
    name = draw.choice(sorted(CONFIGS))
    params, heads, kv = CONFIGS[name]
    b, s = draw.integer(1, 3), draw.integer(1, 4)
    rows = tuple(tuple(draw.integers(0, 2**17 - 1, s)) for _ in range(b))
    amax = [draw.choice((0.05, 100.0, 400.0, 900.0)) for _ in range(2)]
    test = Fp8Test("drawn", f"Drawn at run time ({name}): {b} x {s} positions, quantised maxima near {amax}.",
                   ("Float8Quantized", "GroupedQuery"), rows, heads=heads, kv_heads=kv,
                   q_scale=_scaled(amax[0]), k_scale=_scaled(amax[1]))
    return [TestGroupSpec(params, (test,))]


def protocol(build_qk, compute_qk, shapes_qk, exact_qk, params_schema) -> VectorProtocol:
    """The VectorProtocol: rope.apply_qk's arrays, build, compute, shapes and exact (passed in by
    reference/rope/vectors/protocols.py) with the scales added to each test's parameters."""

    def build(case_id, params, test: Fp8Test):
        test_params, inputs = build_qk(case_id, params, test)
        return {**test_params, "q_scale": float(test.q_scale), "k_scale": float(test.k_scale)}, inputs

    scale = {"type": "number", "exclusiveMinimum": 0}
    schema = {**params_schema, "required": list(params_schema["required"]) + ["q_scale", "k_scale"],
              "properties": {**params_schema["properties"], "q_scale": scale, "k_scale": scale}}
    return VectorProtocol(NAME, {"q": "float64", "k": "float64", "positions": "int64", "q_expected": "float64",
                                 "k_expected": "float64"}, ("q", "k", "positions"), schema, build, compute_qk,
                          shapes_qk, exact_qk, fresh=fresh)
