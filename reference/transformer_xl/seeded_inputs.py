"""transformer_xl.score inputs named by their seed instead of stored: the cases at a model's shape.

Why. At Transformer-XL's shape (16 heads of 64, d_model 1024, 1600 memory slots before 128 queries)
a case's inputs are 1.8 M values of k and 1 M of r_weight: 22 MB of float64, while the graded
entries are a few hundred. Such a case (parameter ``inputs_from`` "seed") stores empty inputs and
names them: ``inputs_seed`` (the case id) and ``inputs_sha256``.

Derivation: the same as a stored case's (vectors.build_score): for each role,
``representable_inputs(inputs_seed, shape, role) * SCALE[role]`` (reference.golden.inputs: PCG64 from
sha256("<seed>#<role>"), raw words only, 8 significant bits; the scales are powers of two, so every
value stays exact in float64, float32, bfloat16 and float16).

Integrity: ``inputs_sha256`` is sha256 over the derived arrays' float64 little-endian C-order bytes,
roles in INPUTS order; both parameters live in the group's JSON, which MANIFEST.json hashes, and a
derivation that no longer gives the certified inputs is refused when they are read (``inputs_of``).
(reference.learned.seeded_table does the same for learned.lookup's tables.)
"""

from __future__ import annotations

import hashlib

import numpy as np

from reference.golden.inputs import representable_inputs

SOURCE = "seed"


def is_seeded(params) -> bool:
    return params.get("inputs_from") == SOURCE


def derive(seed: str, shapes: dict, scales: dict) -> dict:
    """{role: float64 array} of every role in ``scales``, derived from ``seed`` (module docstring)."""
    if not isinstance(seed, str) or not seed:
        raise ValueError(f"inputs_seed: a non-empty string, got {seed!r}")
    return {role: representable_inputs(seed, shapes[role], role) * scale for role, scale in scales.items()}


def digest(arrays: dict, roles) -> str:
    h = hashlib.sha256()
    for role in roles:
        h.update(np.ascontiguousarray(arrays[role], dtype="<f8").tobytes())
    return h.hexdigest()


def inputs_of(params, stored: dict, shapes: dict, scales: dict) -> dict:
    """The case's inputs: ``stored`` itself, or for a seeded case the derived ones, checked against
    ``inputs_sha256`` (ValueError naming the seed when the derivation no longer gives them)."""
    if not is_seeded(params):
        return {role: stored[role] for role in scales}
    if any(np.asarray(stored[role]).size for role in scales):
        raise ValueError(f"inputs: a seeded case stores no inputs (inputs_seed {params.get('inputs_seed')!r})")
    derived = derive(params.get("inputs_seed"), shapes, scales)
    if digest(derived, scales) != params.get("inputs_sha256"):
        raise ValueError(f"inputs_sha256: the inputs derived from inputs_seed {params['inputs_seed']!r} are not the "
                         "certified ones (the derivation changed)")
    return derived
