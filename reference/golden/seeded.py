"""Inputs named by their seed instead of stored: committed cases at a real model's full shape.

Why. At a model's shape a case's inputs can be megabytes (learned.lookup: GPT-2's table, 1024 x 768;
transformer_xl.score: k and r_weight at d_model 1024, 22 MB) while the graded values are a few
hundred. Such a case stores empty inputs and names them with three parameters sharing a prefix P
(``table`` for learned.lookup, ``inputs`` for transformer_xl.score):

- ``P_from`` = "seed": the inputs are derived, not stored;
- ``P_seed``: the seed (the case id);
- ``P_sha256``: sha256 over the derived arrays' float64 little-endian C-order bytes, roles in order.

Derivation: the one every stored case uses (reference.golden.inputs.representable_inputs: PCG64 from
sha256("<seed>#<role>"), raw 64-bit words only, 8 significant bits), times a power-of-two scale per
role: every value exact in float64, float32, bfloat16 and float16, and the same values a stored case
with that id would hold.

Integrity: the parameters live in the group's JSON, which MANIFEST.json hashes; a derivation that no
longer gives the certified arrays (another numpy, an edited generator) is refused when they are read
(``Seeded.inputs_of`` raises ValueError naming the digest), never graded silently.
"""

from __future__ import annotations

import functools
import hashlib

import numpy as np

from reference.golden.inputs import representable_inputs

SOURCE = "seed"  # the value of P_from


@functools.lru_cache(maxsize=8)
def _derived(seed: str, shape: tuple, role: str, scale: float) -> np.ndarray:
    out = representable_inputs(seed, shape, role) * scale
    out.setflags(write=False)  # shared by every reader of the cache
    return out


def digest(arrays: dict, roles) -> str:
    """sha256 hex over the arrays of ``roles`` (float64 little-endian, C order), in that order."""
    h = hashlib.sha256()
    for role in roles:
        h.update(np.ascontiguousarray(arrays[role], dtype="<f8").tobytes())
    return h.hexdigest()


class Seeded:
    """The parameters ``<prefix>_from``, ``_seed`` and ``_sha256`` of one protocol's seeded cases."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.source, self.seed, self.sha256 = (f"{prefix}_{name}" for name in ("from", "seed", "sha256"))

    def is_seeded(self, params) -> bool:
        return params.get(self.source) == SOURCE

    def derive(self, seed, shapes: dict, scales: dict) -> dict:
        """{role: read-only float64 array} of every role in ``scales``, derived from ``seed``."""
        if not isinstance(seed, str) or not seed:
            raise ValueError(f"{self.seed}: a non-empty string, got {seed!r}")
        return {role: _derived(seed, tuple(int(n) for n in shapes[role]), role, float(scale))
                for role, scale in scales.items()}

    def named(self, seed: str, arrays: dict, roles) -> dict:
        """The test parameters naming ``arrays`` (derived from ``seed``) in a case."""
        return {self.seed: seed, self.sha256: digest(arrays, roles)}

    def inputs_of(self, params, stored: dict, shapes: dict, scales: dict) -> dict:
        """The case's inputs: ``stored`` itself, or for a seeded case the derived ones, checked against
        ``<prefix>_sha256`` (ValueError naming the seed when the derivation no longer gives them)."""
        if not self.is_seeded(params):
            return {role: stored[role] for role in scales}
        if any(np.asarray(stored[role]).size for role in scales):
            raise ValueError(f"{self.prefix}: a seeded case stores no {self.prefix} "
                             f"({self.seed} {params.get(self.seed)!r})")
        derived = self.derive(params.get(self.seed), shapes, scales)
        if digest(derived, scales) != params.get(self.sha256):
            raise ValueError(f"{self.sha256}: {self.seed} {params[self.seed]!r} no longer derives the certified "
                             f"{self.prefix} (the derivation changed)")
        return derived

    def schema(self) -> dict:
        """The three parameters' JSON Schema properties and their mutual requirement."""
        return {"properties": {self.source: {"enum": [SOURCE]},
                               self.seed: {"type": "string", "minLength": 1},
                               self.sha256: {"type": "string", "pattern": "^[0-9a-f]{64}$"}},
                "dependentRequired": {self.source: [self.seed, self.sha256],
                                      self.seed: [self.source], self.sha256: [self.source]}}
