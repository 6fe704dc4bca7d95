"""Golden vectors of ``attention.decode``: one attention layer with its own KV cache, driven by a
script (prefill, then decode steps), as a serving loop drives it.

A case is one script. The arrays hold every token of the run, the steps concatenated along the
sequence axis (``steps`` gives each step's number of tokens):

- ``hidden``          [b, T, D], the layer's input of every token (seeded; exactly representable
                      in bfloat16 and float16, as attention.forward's);
- ``wq``, ``wk``, ``wv``, ``wo``   the weights (nn.Linear layout, no biases), attention.forward's;
- ``positions``       int64 [b, T]: each token's position (left padding: HF's position ids, 1 on
                      the padded slots);
- ``attention_mask``  int64 [b, T]: 1 on real tokens; step t's call receives its first
                      ``stop_t`` columns (the mask of everything seen so far);
- ``expected``        [b, T, D]: step t's slice [start_t, stop_t) is reference.attention.forward
                      over ALL tokens 0..stop_t - 1 (no past_keys: the whole history re-run), the
                      rows of step t's tokens, with ``seq_len`` chosen by the case's semantics.

Semantics of the lengths that RoPE scalings read (dynamic NTK, LongRoPE), ``semantics``:

- ``recompute`` (the default; HF's): at step t every key is rotated as if the history were
  prefilled again with the table of the current length, seq_len_t = the largest position so far
  + 1 (HF's ``dynamic_rope_update``; Phi-3's generate re-prefills when LongRoPE switches tables);
- ``fixed`` (vLLM's): one table for the whole run, seq_len = ``max_model_len``.

A case carries one semantics and is graded against it only. Every value is the nearest double to
the exact one (reference.attention golden mode, mpmath at 192 bits), certified as faithfully
rounded against reference.attention.oracle. Registered in reference/attention/vectors.py.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import mpmath
import numpy as np

from reference import attention
from reference.attention import oracle
from reference.golden.catalog import GroupSpec, TestGroupSpec, TestSpec, VectorProtocol
from reference.golden.inputs import representable_inputs

DECODE = "attention.decode"
SEMANTICS = ("recompute", "fixed")
DEFAULT_SEMANTICS = "recompute"
HF_25104 = "https://github.com/huggingface/transformers/issues/25104"
VLLM_27414 = "https://github.com/vllm-project/vllm/issues/27414"
TT_METAL = "https://github.com/tenstorrent/tt-metal"
HF_PHI3 = "https://github.com/huggingface/transformers/blob/main/src/transformers/models/phi3/modeling_phi3.py"

D_MODEL, HQ, HKV, HEAD = 32, 4, 2, 8
ORIGINAL = 16  # original_max_position_embeddings of the scaled scripts: small, so scripts cross it
FACTOR = 4.0
MAX_MODEL_LEN = int(FACTOR * ORIGINAL)  # vLLM's max_model_len for the fixed semantics
SCALED_BASE = 500.0
SCALE = {"hidden": 1.0, "wq": 0.125, "wk": 0.125, "wv": 0.125, "wo": 0.25}  # attention.forward's
DYNAMIC = {"rope_type": "dynamic", "factor": FACTOR, "original_max_position_embeddings": ORIGINAL}
# LongRoPE factors for rotary_dim 8 (4 pairs), shaped like Phi-3's: short near 1, long growing with
# the wavelength (the slow pairs interpolated most).
LONGROPE = {"rope_type": "longrope", "short_factor": [1.0, 1.0625, 1.125, 1.25],
            "long_factor": [1.0, 1.5, 4.0, 12.0], "factor": FACTOR, "original_max_position_embeddings": ORIGINAL}

NOTES = {
    "DecodeScript": {"bugType": "FUNCTIONALITY", "description": "attention.decode: one layer instance with its own "
                     "KV cache called step after step (prefill, then decode); step t is graded against the "
                     "attention over every token so far, re-run without a cache.", "links": [HF_25104]},
    "LeftPadding": {"bugType": "EDGE_CASE", "description": "Batched rows of different lengths, left-padded "
                    "(HF position ids: 1 on the padded slots); the mask grows by one column per decode token.",
                    "links": [HF_25104]},
    "DynamicCrossing": {"bugType": "EDGE_CASE", "description": "Dynamic NTK across original_max_position_embeddings: "
                        "under recompute every cached key turns with the current base; a cache of keys rotated at "
                        "their own step keeps an old base (HF #25104).", "links": [HF_25104]},
    "LongRopeCrossing": {"bugType": "EDGE_CASE", "description": "LongRoPE across original_max_position_embeddings: "
                         "keys cached with the short factors while queries use the long ones (vLLM #27414).",
                         "links": [VLLM_27414, HF_PHI3]},
    "DecodePosition": {"bugType": "BASIC", "description": "Each decode token at the position after the cache; one "
                       "past or short of it (tt-metal's Falcon decode) shifts every distance to the cache.",
                       "links": [TT_METAL]},
}


@dataclass(frozen=True)
class DecodeTest(TestSpec):
    steps: tuple = ()  # per step: per batch row, the step's positions
    pad: tuple = ()  # per batch row: the number of left-padded slots at the start


def _params(scaling=None, semantics=DEFAULT_SEMANTICS) -> dict:
    # The scaled scripts use base 500 (SCALED_BASE): at positions below 20 the pairs of base 10000 turn
    # so little that a cache fault moves them less than bfloat16 rounds (measured: HF's stale keys
    # passed some bfloat16 draws); at base 500 every pair turns by 0.15 rad or more by position 16.
    base = 10000.0 if scaling is None else SCALED_BASE
    return {"num_heads": HQ, "num_kv_heads": HKV, "head_dim": HEAD, "d_model": D_MODEL, "causal": True,
            "encoding": "rope", "base": base, "rotary_dim": HEAD, "layout": "half", "scaling": scaling,
            "semantics": semantics, "max_model_len": MAX_MODEL_LEN}


def _script(prefill: int, decode: int, pad: int, chunk: int = 0) -> tuple:
    """Steps for two rows: row 0 unpadded, row 1 left-padded by ``pad`` (HF position ids 1 on the
    padded slots, then 0, 1, ...); a prefill of ``prefill`` slots, ``decode`` one-token steps, then
    a step of ``chunk`` tokens if any."""
    row1 = [1] * pad + list(range(prefill - pad))
    steps = [(tuple(range(prefill)), tuple(row1))]
    at0, at1 = prefill, prefill - pad
    for n in [1] * decode + ([chunk] if chunk else []):
        steps.append((tuple(range(at0, at0 + n)), tuple(range(at1, at1 + n))))
        at0, at1 = at0 + n, at1 + n
    return tuple(steps)


def _dynamic(semantics):
    return DecodeTest(
        f"dynamic-ntk-{semantics}",
        f"Dynamic NTK (factor {FACTOR:g}, original {ORIGINAL}), {semantics} semantics: a prefill of 14 slots "
        "(row 1 left-padded by 3), then 5 one-token steps to length 19: the base scales from length 17 on "
        f"(recompute: every key at the current length's base; fixed: the base of max_model_len {MAX_MODEL_LEN} "
        "throughout).", ("DecodeScript", "LeftPadding", "DynamicCrossing", "DecodePosition"),
        _script(ORIGINAL - 2, 5, 3), (0, 3))


def _longrope(semantics):
    return DecodeTest(
        f"longrope-{semantics}",
        f"LongRoPE (original {ORIGINAL}, factor {FACTOR:g}), {semantics} semantics: a prefill of 14 slots (row 1 "
        "left-padded by 2), then 5 one-token steps to length 19 (recompute: short factors up to length 16, long "
        "factors for every key from 17 on; fixed: the long factors throughout).",
        ("DecodeScript", "LeftPadding", "LongRopeCrossing", "DecodePosition"), _script(ORIGINAL - 2, 5, 2), (0, 2))


def groups() -> list[GroupSpec]:
    src = "posref issue 28: stateful attention through the implementation's own cache"
    return [GroupSpec(DECODE, "scripts-d32", "One attention layer (D 32, 4 query heads over 2 kv heads, head_dim 8) "
                      "with its own KV cache: prefill, then decode steps, batched rows left-padded to different "
                      "lengths; default RoPE, and dynamic NTK and LongRoPE across original_max_position_embeddings "
                      "16 under each semantics.", (
                          TestGroupSpec(_params(), (DecodeTest(
                              "default-left-padding", "Default RoPE: a prefill of 6 slots (row 1 left-padded by 2), "
                              "three one-token steps, then a step of 2 tokens.",
                              ("DecodeScript", "LeftPadding", "DecodePosition"), _script(6, 3, 2, 2), (0, 2)),),
                              src),
                          *(TestGroupSpec(_params(DYNAMIC, sem), (_dynamic(sem),), src) for sem in SEMANTICS),
                          *(TestGroupSpec(_params(LONGROPE, sem), (_longrope(sem),), src) for sem in SEMANTICS),
                      ))]


def fresh(draw) -> list[TestGroupSpec]:
    """Two scripts drawn at run time, so that no step's answer can be looked up in a file: default
    RoPE with a drawn prefill (3 to 8 slots), left padding of row 1 (0 to 2), 2 to 4 one-token
    steps and maybe a 2-token step; and dynamic NTK or LongRoPE under a drawn semantics, a prefill of
    12 to 15 slots (row 1 padded by 0 to 3) and one-token steps to a drawn length 19 or 20, past
    original_max_position_embeddings 16. Ids name the draw (``default``, ``<scaling>-<semantics>``)."""
    prefill, pad = draw.integer(3, 8), draw.integer(0, 2)
    default = DecodeTest("default", f"Drawn at run time: default RoPE, a prefill of {prefill} slots (row 1 left-padded "
                         f"by {pad}), then decode steps.", ("DecodeScript", "LeftPadding", "DecodePosition"),
                         _script(prefill, draw.integer(2, 4), pad, draw.choice((0, 2))), (0, pad))
    kind, semantics = draw.choice(("dynamic-ntk", "longrope")), draw.choice(SEMANTICS)
    prefill, pad, end = draw.integer(12, ORIGINAL - 1), draw.integer(0, 3), draw.integer(ORIGINAL + 3, ORIGINAL + 4)
    flag = "DynamicCrossing" if kind == "dynamic-ntk" else "LongRopeCrossing"
    scaled = DecodeTest(f"{kind}-{semantics}", f"Drawn at run time: {kind}, {semantics} semantics, a prefill of "
                        f"{prefill} slots (row 1 left-padded by {pad}), then one-token steps to length {end}.",
                        ("DecodeScript", "LeftPadding", flag), _script(prefill, end - prefill, pad), (0, pad))
    scaling = DYNAMIC if kind == "dynamic-ntk" else LONGROPE
    return [TestGroupSpec(_params(), (default,)), TestGroupSpec(_params(scaling, semantics), (scaled,))]


# --------------------------------------------------------------------------------------------
# Protocol hooks


def step_bounds(steps) -> list:
    """[(start, stop)] of each step along the sequence axis (the steps' token counts)."""
    stops = list(itertools.accumulate(int(n) for n in steps))
    return list(zip([0] + stops[:-1], stops))


def step_seq_len(params: dict, positions: np.ndarray, stop: int) -> int:
    """The seq_len of the reference at a step ending at ``stop``: ``fixed`` max_model_len;
    ``recompute`` the largest position of the tokens so far + 1 (HF's dynamic_rope_update reads the
    largest position id of the call; positions grow, so the history's largest is the step's)."""
    if params.get("semantics", DEFAULT_SEMANTICS) == "fixed":
        return int(params["max_model_len"])
    return int(np.max(positions[:, :stop])) + 1


def build(case_id: str, params: dict, test: DecodeTest):
    if not test.steps or any(len(row) == 0 for step in test.steps for row in step):
        raise ValueError(f"{case_id}: every step needs at least one token")
    positions = np.concatenate([np.array(step, dtype=np.int64) for step in test.steps], axis=1)
    b, T = positions.shape
    mask = np.ones((b, T), dtype=np.int64)
    for row, pad in enumerate(test.pad):
        mask[row, :pad] = 0
    hq, hkv, d, dm = params["num_heads"], params["num_kv_heads"], params["head_dim"], params["d_model"]
    shapes = {"hidden": (b, T, dm), "wq": (hq * d, dm), "wk": (hkv * d, dm), "wv": (hkv * d, dm), "wo": (dm, hq * d)}
    arrays = {role: representable_inputs(case_id, shape, role) * SCALE[role] for role, shape in shapes.items()}
    arrays.update(positions=positions, attention_mask=mask)
    if params.get("semantics") == "fixed" and np.max(positions) >= params["max_model_len"]:
        raise ValueError(f"{case_id}: a position reaches max_model_len")
    return {"steps": [len(step[0]) for step in test.steps]}, arrays


def step_calls(params: dict, inputs: dict):
    """For each step: (start, stop, reference.attention.forward's arguments over tokens 0..stop-1)."""
    from reference.attention.vectors import config_of

    pos = np.asarray(inputs["positions"], dtype=np.int64)
    for start, stop in step_bounds(params["steps"]):
        step_params = dict(params, seq_len=step_seq_len(params, pos, stop))
        weights = {n: inputs[n] for n in ("wq", "wk", "wv", "wo")}
        yield start, stop, step_params, (inputs["hidden"][:, :stop], weights, pos[:, :stop], config_of(step_params)), \
            np.asarray(inputs["attention_mask"])[:, :stop].astype(bool)


def compute(params: dict, inputs: dict, backend: str) -> dict:
    out = np.zeros(np.shape(inputs["hidden"]))
    for start, stop, _, args, mask in step_calls(params, inputs):
        out[:, start:stop] = attention.forward(*args, attention_mask=mask, backend=backend, mode="golden")[:, start:]
    return {"expected": out}


def exact(params: dict, inputs: dict) -> dict:
    out = np.empty(np.shape(inputs["hidden"]), dtype=object)
    with mpmath.workprec(240):
        for start, stop, step_params, args, mask in step_calls(params, inputs):
            hidden, weights, pos = args[:3]
            b, _, _ = hidden.shape
            empty = np.zeros((b, params["num_kv_heads"], 0, params["head_dim"]))
            full = oracle.forward_exact(hidden, weights, pos, step_params, mask, empty, empty)
            out[:, start:stop] = full[:, start:]
    return {"expected": out}


def shapes(params: dict, arrays: dict) -> dict:
    positions = arrays["positions"]
    if positions.ndim != 2 or sum(params["steps"]) != positions.shape[1]:
        return {"positions": ("batch", sum(params["steps"]))}
    b, T = positions.shape
    return {"hidden": (b, T, params["d_model"]), "attention_mask": (b, T), "expected": (b, T, params["d_model"])}


PARAMS_SCHEMA = {
    "type": "object", "additionalProperties": False,
    "required": ["num_heads", "num_kv_heads", "head_dim", "d_model", "causal", "encoding", "base", "rotary_dim",
                 "layout", "scaling", "semantics", "max_model_len", "steps"],
    "properties": {
        "num_heads": {"type": "integer", "minimum": 1}, "num_kv_heads": {"type": "integer", "minimum": 1},
        "head_dim": {"type": "integer", "minimum": 2}, "d_model": {"type": "integer", "minimum": 1},
        "causal": {"const": True}, "encoding": {"const": "rope"}, "base": {"type": "number"},
        "rotary_dim": {"type": "integer", "minimum": 0}, "layout": {"enum": ["half", "interleaved"]},
        "scaling": {"type": ["object", "null"]}, "semantics": {"enum": list(SEMANTICS)},
        "max_model_len": {"type": "integer", "minimum": 1},
        "steps": {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 1}},
    },
}

PROTOCOL = VectorProtocol(
    DECODE, {"hidden": "float64", "wq": "float64", "wk": "float64", "wv": "float64", "wo": "float64",
             "positions": "int64", "attention_mask": "int64", "expected": "float64"},
    ("hidden", "wq", "wk", "wv", "wo", "positions", "attention_mask"), PARAMS_SCHEMA, build, compute, shapes, exact,
    rounding="faithful", fresh=fresh)
