"""rope.kv_write's cache side (conformance/rope/kv_write.py): reading the caches back, the sentinel
check, and the diagnosis of where each token's k and v went and what was written there.

The caches come back in the canonical frame [num_blocks * block_size, kv_heads, head_dim] (slot by
slot), float64. A slot *holds* token i when its key row is within MATCH (relative rms) of k_i or
of k_i rotated at its position, or its value row of v_i or of v_i rotated: close enough for any
dtype's rounding (bfloat16's rotation errs by about 2**-7 relative), far from any other token's
row (the seeded inputs of two tokens differ by about their own size). numpy only.
"""

from __future__ import annotations

import numpy as np

from conformance.core import rotation_reference as reference
from conformance.core.protocol import Graded
from conformance.core.rotation_apply import rotation_ratios
from conformance.core.tensors import abs_error
from conformance.results import Diagnosis

MATCH = 0.05  # relative rms distance under which a cache row is taken for a token's row


def read_caches(prepared) -> tuple:
    """(k_cache, v_cache) as written by the adapter, float64 [num_blocks * block_size, kv_heads,
    head_dim]."""
    import torch

    out = []
    for t in prepared.args[4:6]:
        a = t.detach().to("cpu", torch.float64).numpy()
        out.append(a.reshape(-1, a.shape[-2], a.shape[-1]))
    return tuple(out)


def written_rows(prepared, caches) -> tuple:
    """(k rows, v rows) at the real tokens' slots, each [1, n, kv_heads, head_dim], and the real
    tokens' indices [n] (slot_mapping >= 0)."""
    slots = prepared.inputs_f64["slot_mapping"]
    tokens = np.flatnonzero(slots >= 0)
    return caches[0][slots[tokens]][None], caches[1][slots[tokens]][None], tokens


def _where(slot: int, block_size: int) -> str:
    return f"slot {slot} (block {slot // block_size}, offset {slot % block_size})"


def stray_slots(prepared, caches) -> np.ndarray:
    """Slots outside slot_mapping that do not hold the sentinel (NaN) in either cache."""
    slots = prepared.inputs_f64["slot_mapping"]
    others = np.setdiff1d(np.arange(caches[0].shape[0]), slots[slots >= 0])
    touched = [~np.all(np.isnan(c[others]).reshape(others.size, -1), axis=1) for c in caches]
    return others[touched[0] | touched[1]]


def _holders(prepared, spec, caches) -> np.ndarray:
    """bool [t, slots]: which slots hold which token (module docstring)."""
    x = prepared.inputs_f64
    pos = x["positions"]
    hold = np.zeros((pos.shape[1], caches[0].shape[0]), dtype=bool)
    for cache, role in ((caches[0], "k"), (caches[1], "v")):
        plain = x[role][0]
        rotated = reference.apply(x[role], pos, spec, spec.layout)[0]
        rows = cache.reshape(cache.shape[0], -1)
        for cand in (plain, rotated):
            c = cand.reshape(cand.shape[0], -1)
            with np.errstate(invalid="ignore", over="ignore"):
                dist = np.sqrt(np.mean((rows[None, :, :] - c[:, None, :]) ** 2, axis=-1))
                size = np.sqrt(np.mean(c * c, axis=-1))[:, None]
                hold |= dist <= MATCH * np.maximum(size, 1e-300)
    return hold


def sentinel_problems(prepared, caches) -> list:
    """The failure for slots outside slot_mapping that were written ([] when none was): where the
    tokens went (``placement``), or ``kv-wrong-slot`` naming the first such slot."""
    stray = stray_slots(prepared, caches)
    if not stray.size:
        return []
    spec = prepared.args[-1]
    found = placement(prepared, spec, caches, stray)
    if not found:
        first = _where(int(stray[0]), spec.block_size)
        found = [Diagnosis("kv-wrong-slot", f"{stray.size} slot(s) outside slot_mapping were written, the first "
                           f"{first}: they must keep the sentinel")]
    return found


def placement(prepared, spec, caches, stray) -> list:
    """Where the tokens went: ``kv-padding-written`` when a slot outside slot_mapping (``stray``)
    holds a padding token, ``kv-wrong-slot`` when a real token's k or v is found at another slot
    and not at its own (the message guesses the misreading)."""
    x = prepared.inputs_f64
    slots = x["slot_mapping"]
    hold = _holders(prepared, spec, caches)
    found = []
    padding = np.flatnonzero(slots < 0)
    if stray.size and padding.size and hold[np.ix_(padding, stray)].any():
        at = stray[hold[np.ix_(padding, stray)].any(0)]
        i = int(padding[hold[np.ix_(padding, at[:1])].any(1)][0])
        last = ": the cache's last slot, where indexing with -1 writes" if int(at[0]) == caches[0].shape[0] - 1 else ""
        found.append(Diagnosis("kv-padding-written", f"padding token {i} (slot -1) written at "
                               f"{_where(int(at[0]), spec.block_size)}{last}; slots outside slot_mapping must keep "
                               "the sentinel"))
    wrong = []
    for i in np.flatnonzero(slots >= 0):
        at = np.flatnonzero(hold[i])
        if at.size and slots[i] not in at:
            wrong.append((int(i), int(at[0])))
    if wrong:
        i, j = wrong[0]
        s, p = int(slots[i]), int(x["positions"][0, i])
        found.append(Diagnosis(
            "kv-wrong-slot", f"{len(wrong)} token(s) written at another slot than slot_mapping's: token {i} "
            f"(position {p}) at {_where(j, spec.block_size)} instead of {_where(s, spec.block_size)}: "
            f"{_pattern(i, j, s, p, spec.block_size)}"))
    return found


def _pattern(i: int, j: int, slot: int, position: int, block_size: int) -> str:
    """What a misplaced write looks like: token i written at j instead of slot."""
    if j == i:
        return "slot = token index (slot_mapping ignored, as for a contiguous cache)"
    if j == position:
        return "slot = position (the block table not read)"
    if j == (slot % block_size) * block_size + slot // block_size:
        return "block and offset swapped"
    return "a misread block table"


def diagnose(prepared, spec, graded, dtype) -> list:
    """Where the tokens went, then what the right slots hold (module docstring); [] when the
    placement and the contents are right (rope.apply's diagnosis then explains q_rot and the keys)."""
    x = prepared.inputs_f64
    caches = (graded.output_f64["k_cache"], graded.output_f64["v_cache"])
    found = sentinel_problems(prepared, caches) or placement(prepared, spec, caches, np.array([], dtype=np.int64))
    if found:
        return found
    slots = x["slot_mapping"]
    tokens = np.flatnonzero(slots >= 0)
    pos = x["positions"][:, tokens]
    k, v = x["k"][:, tokens], x["v"][:, tokens]
    k_rows, v_rows = caches[0][slots[tokens]][None], caches[1][slots[tokens]][None]
    if np.any(abs_error(v_rows, v) > 0) and _within(spec, dtype, v, pos, v_rows):
        found.append(Diagnosis("kv-value-rotated", "v_cache holds v rotated at the tokens' positions: the values "
                               "must be written as they are (RoPE turns q and k only)"))
    if np.all(abs_error(k_rows, k) == 0) and not _within(spec, dtype, k, pos, k_rows):
        found.append(Diagnosis("kv-written-unrotated", "k_cache holds k as it came in, not rotated: the keys were "
                               "written before RoPE (or the rotated copy was dropped)"))
    return found


def _within(spec, dtype, x, pos, out) -> bool:
    """Whether out is the rotation of x at pos within the standard budget."""
    trial = Graded()
    ref = reference.apply(x, pos, spec, spec.layout)
    rotation_ratios(trial, "standard", spec, dtype, x, pos, abs_error(out, ref))
    ratio = trial.ratio.get("standard")
    return ratio is not None and ratio <= 1.0
