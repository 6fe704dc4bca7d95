"""Golden vectors of ``rope.module`` (stateful rotary modules): scripted call sequences.

A case is one script: a module built once from the case's spec, then called step after step with
x and positions of each step. The arrays hold the steps concatenated along the sequence axis
(``steps`` gives each step's number of tokens):

- ``x``         [b, total, h, head_dim], seeded, exactly representable in bfloat16 and float16;
- ``positions`` int64 [b, total];
- ``expected``  [b, total, h, head_dim]: step k's slice is reference.rope.apply of that step's x
                and positions with ``seq_len`` = the step's current length (its largest position
                + 1, what HF's ``dynamic_rope_update`` uses), mode "golden" (correctly rounded),
                computed afresh for every step: no state carries from one step to the next.

``cast``: the runner casts the module with ``module.to(dtype)`` (as ``model.to(torch.bfloat16)``)
before the first step. The scripts re-enact documented bugs of stateful rotary modules (see the
comments of each test and ``NOTES``). Registered in reference/rope/vectors/ (``PROTOCOLS``,
``groups()``, ``NOTES``), which the golden catalog reads.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reference import rope
from reference.golden.catalog import GroupSpec, TestGroupSpec, TestSpec, VectorProtocol
from reference.golden.inputs import representable_inputs
from reference.rope import oracle

HF_ROPE_UTILS = "https://github.com/huggingface/transformers/blob/main/src/transformers/modeling_rope_utils.py"
HF_DYNAMIC_RESET = "https://github.com/huggingface/transformers/pull/30315"
ROTARY_TORCH = "https://github.com/lucidrains/rotary-embedding-torch"
PHI3 = "https://huggingface.co/microsoft/Phi-3-mini-128k-instruct"

NOTES = {
    "StatefulModule": {
        "bugType": "FUNCTIONALITY",
        "description": "rope.module: one module instance called step after step; every step is "
        "graded against the float64 reference computed afresh for that step's positions and "
        "current length (largest position + 1), so state kept from an earlier step shows.",
        "links": [HF_ROPE_UTILS],
    },
    "DynamicReset": {
        "bugType": "FUNCTIONALITY",
        "description": "Dynamic NTK: after a prompt longer than the original context, a short "
        "prompt must use the base frequencies again. Modules that only ever grow their cached "
        "length (transformers before the reset was added) keep the scaled base.",
        "links": [HF_ROPE_UTILS, HF_DYNAMIC_RESET],
    },
    "LongRopeSwitch": {
        "bugType": "FUNCTIONALITY",
        "description": "LongRoPE: decode steps crossing the original context; the short factors "
        "apply while the current length (largest position + 1) is at most "
        "original_max_position_embeddings, the long ones past it.",
        "links": [HF_ROPE_UTILS, PHI3],
    },
    "OffsetCache": {
        "bugType": "FUNCTIONALITY",
        "description": "The same number of tokens at two different offsets: a cos/sin cache keyed "
        "on the length alone returns the first offset's tables for the second.",
        "links": [ROTARY_TORCH],
    },
    "ModuleCast": {
        "bugType": "FUNCTIONALITY",
        "description": "The module is cast with module.to(dtype) before the first call, as users "
        "cast a model (model.to(torch.bfloat16)): floating buffers such as inv_freq get rounded "
        "to the dtype unless the module keeps its frequencies out of them.",
        "links": [HF_ROPE_UTILS],
    },
}


@dataclass(frozen=True)
class ModuleTest(TestSpec):
    """One script. ``steps`` holds one tuple of positions per step (one batch row)."""

    steps: tuple[tuple[int, ...], ...] = ()
    heads: int = 2
    cast: bool = False


HEAD_DIM = 32  # small on purpose: the state is under test, not the head size
ORIGINAL = 32  # original_max_position_embeddings of the scaled scripts
# LongRoPE factors for rotary_dim 32 (16 pairs): short near 1, long growing with the wavelength,
# shaped like Phi-3's (short ~1 for the fast pairs, long up to tens for the slow ones).
LONG_SHORT = tuple(round(1.0 + 0.0625 * i, 4) for i in range(HEAD_DIM // 2))
LONG_LONG = tuple(round(1.0 + 0.5 * i * i / 8.0, 4) for i in range(HEAD_DIM // 2))


def _params(scaling=None, layout="half", rotary_dim=HEAD_DIM) -> dict:
    return {"head_dim": HEAD_DIM, "rotary_dim": rotary_dim, "base": 10000.0, "layout": layout,
            "scaling": scaling}


def _span(start, count):
    return tuple(range(start, start + count))


DYNAMIC = {"rope_type": "dynamic", "factor": 4.0, "original_max_position_embeddings": ORIGINAL}
DYNAMIC_4K = {"rope_type": "dynamic", "factor": 4.0, "original_max_position_embeddings": 4096}
LONGROPE = {"rope_type": "longrope", "short_factor": list(LONG_SHORT), "long_factor": list(LONG_LONG),
            "factor": 4.0, "original_max_position_embeddings": ORIGINAL}

SCRIPTS = (
    (_params(DYNAMIC), ModuleTest(
        "dynamic-long-then-short",
        f"Dynamic NTK (factor 4, original {ORIGINAL}): a prompt of 40 tokens (length 40 > {ORIGINAL}: "
        "scaled base), then a new short prompt of 6 tokens and one decode step: both must use the "
        "base frequencies again (a module that keeps the scaled base from step 0 is stale).",
        ("StatefulModule", "DynamicReset"),
        (_span(0, 40), _span(0, 6), (6,)))),
    (_params(DYNAMIC), ModuleTest(
        "dynamic-growing",
        f"Dynamic NTK: a prompt of {ORIGINAL - 2} tokens, then decode steps to length {ORIGINAL + 3}: "
        "the base grows with every step past the original length.",
        ("StatefulModule",),
        (_span(0, ORIGINAL - 2),) + tuple((p,) for p in range(ORIGINAL - 2, ORIGINAL + 3)))),
    (_params(LONGROPE), ModuleTest(
        "longrope-decode-crossing",
        f"LongRoPE (original {ORIGINAL}): a prompt of {ORIGINAL - 2} tokens, then decode steps at "
        f"positions {ORIGINAL - 2} to {ORIGINAL + 1}: short factors up to length {ORIGINAL} "
        f"(position {ORIGINAL - 1}), long factors from length {ORIGINAL + 1} on.",
        ("StatefulModule", "LongRopeSwitch"),
        (_span(0, ORIGINAL - 2),) + tuple((p,) for p in range(ORIGINAL - 2, ORIGINAL + 2)))),
    (_params(), ModuleTest(
        "same-length-two-offsets",
        "6 tokens at positions 0..5, then 6 tokens at 4090..4095 (same length, another offset), "
        "then one decode step at 4096: a cache keyed on the length returns the first step's tables.",
        ("StatefulModule", "OffsetCache"),
        (_span(0, 6), _span(4090, 6), (4096,)))),
    (_params(), ModuleTest(
        "cast-to-dtype",
        "module.to(dtype) before the first call (model.to(torch.bfloat16)), then a prompt of 8 tokens "
        "and decode steps at 4095 and 70000: rounded frequencies turn far positions by wrong angles.",
        ("StatefulModule", "ModuleCast"),
        (_span(0, 8), (4095,), (70000,)), cast=True)),
    (_params(DYNAMIC_4K), ModuleTest(
        "cast-dynamic",
        "Dynamic NTK (factor 4, original 4096) cast with module.to(dtype): 4 tokens at 4100..4103 "
        "(length 4104: scaled), then one at 4090 (length 4091: base frequencies again); the base "
        "frequencies restored for it must not be a rounded copy.",
        ("StatefulModule", "ModuleCast", "DynamicReset"),
        (_span(4100, 4), (4090,)), cast=True)),
    # Interleaved modules (rotary-embedding-torch, Meta-style freqs_cis) need scripts of their own
    # layout: the scripts above are half-split, which such a module rightly refuses (Unsupported).
    (_params(layout="interleaved"), ModuleTest(
        "interleaved-two-offsets",
        "Interleaved pairs (2i, 2i+1): 6 tokens at positions 0..5, then 6 at 4090..4095 (same length, "
        "another offset), then one decode step at 4096: a cos/sin cache keyed on the length (as "
        "rotary-embedding-torch's cached frequencies, keyed by seq_len and offset) must not return the "
        "first step's tables.",
        ("StatefulModule", "OffsetCache", "Interleaved"),
        (_span(0, 6), _span(4090, 6), (4096,)))),
    (_params(layout="interleaved", rotary_dim=HEAD_DIM // 2), ModuleTest(
        "interleaved-partial-cast",
        f"Interleaved pairs, partial rotary (the first {HEAD_DIM // 2} of {HEAD_DIM} features turn, as "
        "rotary-embedding-torch's RotaryEmbedding(dim=head_dim // 2)), module.to(dtype) before the first "
        "call, then a prompt of 8 tokens and decode steps at 4095 and 70000: the tail passes through "
        "unchanged and rounded frequencies turn far positions by wrong angles.",
        ("StatefulModule", "ModuleCast", "Interleaved", "PartialRotary"),
        (_span(0, 8), (4095,), (70000,)), cast=True)),
)


def groups() -> list[GroupSpec]:
    """One group: every script, a test group per spec (tests of equal parameters together)."""
    test_groups = tuple(TestGroupSpec(params=params, tests=(test,),
                                      source="posref issue 14: stateful rotary modules")
                        for params, test in SCRIPTS)
    return [GroupSpec("rope.module", "scripts-d32",
                      "Scripted call sequences of one rotary module (dynamic NTK reset, LongRoPE "
                      "switch, offset cache, module.to(dtype)), in both pair layouts.", test_groups)]


def fresh(draw) -> list[TestGroupSpec]:
    """Three scripts drawn at run time: dynamic NTK with a drawn long prompt, short prompt and
    decode position (DynamicReset), and the same number of tokens at two drawn offsets
    (OffsetCache), in the half and in the interleaved layout, so that no step's answer can be
    looked up in a file."""
    long_n, short_n = draw.integer(ORIGINAL + 1, ORIGINAL + 24), draw.integer(1, ORIGINAL - 2)
    dynamic = ModuleTest(
        f"dynamic-{long_n}-then-{short_n}",
        f"Drawn at run time: dynamic NTK, a prompt of {long_n} tokens (past the original {ORIGINAL}), "
        f"then a new prompt of {short_n} tokens and one decode step: base frequencies again.",
        ("StatefulModule", "DynamicReset"),
        (_span(0, long_n), _span(0, short_n), (short_n,)))
    n = draw.integer(1, 8)
    first, second = draw.integer(0, 2**16), draw.integer(2**16 + 1, 2**17)
    offsets = ModuleTest(
        f"offsets-{n}-at-{first}-and-{second}",
        f"Drawn at run time: {n} token(s) at offset {first}, then {n} at offset {second}.",
        ("StatefulModule", "OffsetCache"),
        (_span(first, n), _span(second, n)))
    first, second = draw.integer(0, 2**16), draw.integer(2**16 + 1, 2**17)
    interleaved = ModuleTest(
        f"interleaved-offsets-{n}-at-{first}-and-{second}",
        f"Drawn at run time: interleaved pairs, {n} token(s) at offset {first}, then {n} at offset {second}.",
        ("StatefulModule", "OffsetCache", "Interleaved"),
        (_span(first, n), _span(second, n)))
    return [TestGroupSpec(_params(DYNAMIC), (dynamic,)), TestGroupSpec(_params(), (offsets,)),
            TestGroupSpec(_params(layout="interleaved"), (interleaved,))]


# --------------------------------------------------------------------------------------------
# Protocol hooks


def step_bounds(steps) -> list[tuple[int, int]]:
    """[(start, stop)] of each step along the sequence axis, from the step lengths."""
    out, start = [], 0
    for n in steps:
        out.append((start, start + int(n)))
        start += int(n)
    return out


def step_seq_len(positions: np.ndarray) -> int:
    """The current length of a step: its largest position + 1 (HF's dynamic_rope_update)."""
    return int(np.max(positions)) + 1


def build(case_id: str, params: dict, test: ModuleTest):
    """positions int64 [1, total] (the steps concatenated) and x [1, total, heads, head_dim],
    seeded by the case id."""
    if not test.steps or any(len(s) == 0 for s in test.steps):
        raise ValueError(f"{case_id}: every step needs at least one token")
    positions = np.array([sum(test.steps, ())], dtype=np.int64)
    x = representable_inputs(case_id, (1, positions.shape[1], test.heads, params["head_dim"]))
    extra = {"seq_len": None, "steps": [len(s) for s in test.steps], "cast": bool(test.cast)}
    return extra, {"x": x, "positions": positions}


def _steps(params, inputs):
    for start, stop in step_bounds(params["steps"]):
        pos = inputs["positions"][:, start:stop]
        yield inputs["x"][:, start:stop], pos, step_seq_len(pos)


def _scaling(params, seq_len) -> dict:
    if params.get("scaling") is None:
        return {}
    return {"scaling": params["scaling"], "seq_len": seq_len}


def compute(params: dict, inputs: dict, backend: str) -> dict:
    """``expected``: each step's slice = reference.rope.apply(mode="golden") with the step's own
    current length (no state from earlier steps)."""
    parts = [np.asarray(rope.apply(x, pos, rotary_dim=params["rotary_dim"], base=params["base"],
                                   layout=params["layout"], backend=backend, mode="golden",
                                   **_scaling(params, n)), dtype=np.float64)
             for x, pos, n in _steps(params, inputs)]
    return {"expected": np.concatenate(parts, axis=1)}


def exact(params: dict, inputs: dict) -> dict:
    parts = [oracle.apply_exact(x, pos, params["rotary_dim"], params["base"], params["layout"],
                                **_scaling(params, n))
             for x, pos, n in _steps(params, inputs)]
    return {"expected": np.concatenate(parts, axis=1)}


def shapes(params: dict, arrays: dict) -> dict:
    positions = arrays["positions"]
    if positions.ndim != 2:
        return {"positions": ("batch", "seq")}
    b, s = positions.shape
    x = arrays["x"]
    heads = x.shape[2] if x.ndim == 4 else "heads"
    if sum(params["steps"]) != s:
        return {"positions": (b, sum(params["steps"]))}
    return {"x": (b, s, heads, params["head_dim"]), "expected": (b, s, heads, params["head_dim"])}


_EVEN = {"type": "integer", "minimum": 2, "multipleOf": 2}
PARAMS_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["head_dim", "rotary_dim", "base", "layout", "scaling", "steps", "cast"],
    "properties": {
        "head_dim": _EVEN,
        "rotary_dim": _EVEN,
        "base": {"type": "number", "exclusiveMinimum": 0},
        "layout": {"enum": ["half", "interleaved"]},
        "scaling": {"type": ["null", "object"]},
        "seq_len": {"type": "null"},  # per step: largest position + 1
        "steps": {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 1}},
        "cast": {"type": "boolean"},
    },
}

PROTOCOL = VectorProtocol(
    "rope.module", {"x": "float64", "positions": "int64", "expected": "float64"},
    ("x", "positions"), PARAMS_SCHEMA, build, compute, shapes, exact, fresh=fresh)
