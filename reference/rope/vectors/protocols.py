"""RoPE's vector protocols (reference.golden.catalog.VectorProtocol): for rope.apply, rope.apply_qk,
rope.cache and rope.frequencies, the arrays and parameter schema, how inputs are built, expected
values computed (golden mode of reference.rope) and certified (reference.rope.oracle); rope.module's
protocol is module_vectors.py's, rope.cp_positions's cp_vectors.py's.
"""

from __future__ import annotations

import mpmath
import numpy as np

from reference import rope
from reference.golden.catalog import VectorProtocol
from reference.golden.inputs import representable_inputs
from reference.rope import cp_vectors, fp8_vectors, kv_write_vectors, module_vectors, oracle, qk_norm_vectors

from .fresh import _fresh_rotations, fresh_apply, fresh_apply_qk, fresh_frequencies
from .records import QkTest, RopeTest


def _positions(test: RopeTest) -> np.ndarray:
    rows = {len(r) for r in test.positions}
    if len(rows) != 1:
        raise ValueError(f"{test.name}: position rows must have equal lengths")
    return np.array(test.positions, dtype=np.int64)


def _test_params(test: RopeTest, positions) -> dict:
    """Per-test parameters: seq_len, the catalog's or max position + 1; the tensor layout,
    cu_seqlens and in-place flag only where they differ from the default (shape matrix)."""
    seq_len = test.seq_len
    if seq_len is None:
        seq_len = int(positions.max()) + 1
    params = {"seq_len": seq_len}
    if getattr(test, "tensor_layout", "bshd") != "bshd":
        params["tensor_layout"] = test.tensor_layout
    if getattr(test, "cu_seqlens", None) is not None:
        params["cu_seqlens"] = list(test.cu_seqlens)
    if getattr(test, "inplace", False):
        params["inplace"] = True
    return params


def build_apply(case_id: str, params: dict, test: RopeTest):
    """positions int64 [b, s] from the catalog and x [b, s, heads, head_dim] (fixed, or seeded by
    the case id and exactly representable in bfloat16 and float16)."""
    positions = _positions(test)
    b, s = positions.shape
    if test.x is not None:
        x = np.array(test.x, dtype=np.float64)
        if x.shape != (b, s, test.heads, params["head_dim"]):
            raise ValueError(f"{case_id}: fixed x has shape {x.shape}")
    else:
        x = representable_inputs(case_id, (b, s, test.heads, params["head_dim"]))
    return _test_params(test, positions), {"x": x, "positions": positions}


def build_apply_qk(case_id: str, params: dict, test: QkTest):
    """positions int64 [b, s], q [b, s, heads, head_dim] and k [b, s, kv_heads, head_dim], seeded
    by the case id (roles "q" and "k") and exactly representable in bfloat16 and float16."""
    positions = _positions(test)
    b, s = positions.shape
    q = representable_inputs(case_id, (b, s, test.heads, params["head_dim"]), role="q")
    k = representable_inputs(case_id, (b, s, test.kv_heads, params["head_dim"]), role="k")
    return _test_params(test, positions), {"q": q, "k": k, "positions": positions}


def compute_apply_qk(params: dict, inputs: dict, backend: str) -> dict:
    """``q_expected``, ``k_expected``: rope.apply_qk is rope.apply on q and on k with the same
    positions (golden mode: each value the float64 nearest to the exact rotation)."""
    out = {}
    for role in ("q", "k"):
        out[f"{role}_expected"] = compute_apply(params, {"x": inputs[role], "positions": inputs["positions"]},
                                                backend)["expected"]
    return out


def shapes_apply_qk(params: dict, arrays: dict) -> dict:
    positions = arrays["positions"]
    if positions.ndim != 2:
        return {"positions": ("batch", "seq")}
    b, s = positions.shape
    out = {}
    for role in ("q", "k"):
        heads = arrays[role].shape[2] if arrays[role].ndim == 4 else "heads"
        out[role] = out[f"{role}_expected"] = (b, s, heads, params["head_dim"])
    return out


def exact_apply_qk(params: dict, inputs: dict) -> dict:
    return {f"{role}_expected": exact_apply(params, {"x": inputs[role], "positions": inputs["positions"]})["expected"]
            for role in ("q", "k")}


def build_cache(case_id: str, params: dict, test: RopeTest):
    positions = _positions(test)
    return _test_params(test, positions), {"positions": positions}


def build_frequencies(case_id: str, params: dict, test: RopeTest):
    return {"seq_len": test.seq_len}, {}


def _scaling(params: dict) -> dict:
    """The scaling keywords of reference.rope for a case (seq_len only matters when scaled)."""
    if params.get("scaling") is None:
        return {}
    return {"scaling": params["scaling"], "seq_len": params.get("seq_len")}


def compute_apply(params: dict, inputs: dict, backend: str) -> dict:
    """``expected`` = reference.rope.apply(x, positions, mode="golden") [b, s, h, head_dim]:
each value the float64 nearest to the exact rotation."""
    expected = rope.apply(inputs["x"], inputs["positions"], rotary_dim=params["rotary_dim"],
                          base=params["base"], layout=params["layout"], backend=backend, mode="golden",
                          **_scaling(params))
    return {"expected": np.asarray(expected, dtype=np.float64)}


def compute_cache(params: dict, inputs: dict, backend: str) -> dict:
    """``cos``, ``sin`` = reference.rope.cos_sin(positions, mode="golden") [b, s, r/2], each
correctly rounded."""
    cos, sin = rope.cos_sin(inputs["positions"], params["rotary_dim"], params["base"], backend=backend,
                            mode="golden", **_scaling(params))
    return {"cos": np.asarray(cos, dtype=np.float64), "sin": np.asarray(sin, dtype=np.float64)}


def compute_frequencies(params: dict, inputs: dict, backend: str) -> dict:
    """``inv_freq`` [r/2] and ``attention_factor`` (0-d) from reference.rope.frequencies (mpmath:
    the same on every backend)."""
    inv, factor = rope.frequencies(params["rotary_dim"], params["base"], scaling=params["scaling"],
                                   seq_len=params["seq_len"])
    return {"inv_freq": np.asarray(inv, dtype=np.float64),
            "attention_factor": np.array(factor, dtype=np.float64)}


def shapes_apply(params: dict, arrays: dict) -> dict:
    positions = arrays["positions"]
    if positions.ndim != 2:
        return {"positions": ("batch", "seq")}
    b, s = positions.shape
    x = arrays["x"]
    heads = x.shape[2] if x.ndim == 4 else "heads"
    return {"x": (b, s, heads, params["head_dim"]), "expected": (b, s, heads, params["head_dim"])}


def shapes_cache(params: dict, arrays: dict) -> dict:
    positions = arrays["positions"]
    if positions.ndim != 2:
        return {"positions": ("batch", "seq")}
    shape = positions.shape + (params["rotary_dim"] // 2,)
    return {"cos": shape, "sin": shape}


def shapes_frequencies(params: dict, arrays: dict) -> dict:
    return {"inv_freq": (params["rotary_dim"] // 2,), "attention_factor": ()}


def exact_apply(params: dict, inputs: dict) -> dict:
    return {"expected": oracle.apply_exact(inputs["x"], inputs["positions"], params["rotary_dim"],
                                           params["base"], params["layout"], **_scaling(params))}


def exact_cache(params: dict, inputs: dict) -> dict:
    positions = inputs["positions"]
    cos, sin = oracle.cos_sin_exact(positions.reshape(-1), params["rotary_dim"], params["base"],
                                    **_scaling(params))
    shape = positions.shape + (params["rotary_dim"] // 2,)
    return {"cos": np.array(cos, dtype=object).reshape(shape),
            "sin": np.array(sin, dtype=object).reshape(shape)}


def exact_frequencies(params: dict, inputs: dict) -> dict:
    """theta'_i and the attention factor in mpmath (oracle: the plain ladder with the base taken
    exactly from its float64 value, or scaling_oracle's independent formulas of the scaled types)."""
    with mpmath.workprec(oracle.PREC_BITS):
        thetas, factor = oracle.frequencies_exact(params["rotary_dim"], params["base"], params["scaling"],
                                        params.get("seq_len"))
    return {"inv_freq": np.array(thetas, dtype=object), "attention_factor": np.array(factor, dtype=object)}


_EVEN = {"type": "integer", "minimum": 2, "multipleOf": 2}
PARAMS_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["head_dim", "rotary_dim", "base", "layout", "scaling", "seq_len"],
    "properties": {
        "head_dim": _EVEN,
        "rotary_dim": _EVEN,
        "base": {"type": "number", "exclusiveMinimum": 0},
        "layout": {"enum": ["half", "interleaved"]},
        "scaling": {"type": ["null", "object"]},
        "seq_len": {"type": ["null", "integer"], "minimum": 0},
        # Only in fresh shape-matrix cases (never stored): how rope.apply hands the case over.
        "tensor_layout": {"enum": ["bshd", "bhsd", "thd"]},
        "cu_seqlens": {"type": "array", "items": {"type": "integer", "minimum": 0}},
        "inplace": {"type": "boolean"},
    },
}

PROTOCOLS = {
    "rope.module": module_vectors.PROTOCOL,  # stateful modules: reference/rope/module_vectors.py
    "rope.cp_positions": cp_vectors.PROTOCOL,  # context-parallel gather: reference/rope/cp_vectors.py
    "rope.cp_apply": cp_vectors.APPLY_PROTOCOL,  # the rank's tokens rotated: reference/rope/cp_vectors.py
    "rope.kv_write": kv_write_vectors.PROTOCOL,  # RoPE + paged KV-cache write: reference/rope/kv_write_vectors.py
    "rope.qk_norm": qk_norm_vectors.PROTOCOL,  # QK-norm then RoPE: reference/rope/qk_norm_vectors.py
    "rope.apply": VectorProtocol(
        "rope.apply", {"x": "float64", "positions": "int64", "expected": "float64"},
        ("x", "positions"), PARAMS_SCHEMA, build_apply, compute_apply, shapes_apply, exact_apply,
        fresh=lambda draw, shapes="sample": fresh_apply(draw, shapes)),
    "rope.apply_qk": VectorProtocol(
        "rope.apply_qk", {"q": "float64", "k": "float64", "positions": "int64", "q_expected": "float64",
                          "k_expected": "float64"},
        ("q", "k", "positions"), PARAMS_SCHEMA, build_apply_qk, compute_apply_qk, shapes_apply_qk,
        exact_apply_qk, fresh=fresh_apply_qk),
    "rope.cache": VectorProtocol(
        "rope.cache", {"positions": "int64", "cos": "float64", "sin": "float64"},
        ("positions",), PARAMS_SCHEMA, build_cache, compute_cache, shapes_cache, exact_cache,
        fresh=lambda draw: _fresh_rotations(draw, "rope.cache")),
    "rope.frequencies": VectorProtocol(
        "rope.frequencies", {"inv_freq": "float64", "attention_factor": "float64"},
        (), PARAMS_SCHEMA, build_frequencies, compute_frequencies, shapes_frequencies,
        exact_frequencies, fresh=fresh_frequencies),
}
# RoPE then float8 quantisation: rope.apply_qk's arrays with the scales (reference/rope/fp8_vectors.py).
PROTOCOLS["rope.apply_qk_fp8"] = fp8_vectors.protocol(build_apply_qk, compute_apply_qk, shapes_apply_qk, exact_apply_qk,
                                                     PARAMS_SCHEMA)
