"""A learned.lookup table named by its seed instead of stored: the committed cases of the zoo's models.

Why. A lookup's input is the model's whole table (BERT 512 x 768, GPT-2 1024 x 768: 3 to 6 MB of
float64 a case) while its golden output is x plus the few rows the case reads. A committed model case
(``learned.lookup/gpt2-124m/prefill-8``) therefore stores x, the positions and the expected values,
and only the *name* of its table: the parameter ``table_seed`` (the case id) and ``table_sha256``.

Derivation (version-stable, reference.golden.inputs): ``table = representable_inputs(table_seed,
(num_positions, d_model), "table")``: PCG64 seeded with the first 128 bits of
sha256("<table_seed>#table"), only its raw 64-bit words used (numpy's samplers may change between
releases, the PCG64 stream may not), each word's top 53 bits times 2^-53 (a float64 in [0, 1)), then
4u - 2 rounded to 8 significant bits with |value| >= 2^-6: every value exact in float64, float32,
bfloat16 and float16. These are the very values a stored table of the same case id would hold.

Integrity. The seed and ``table_sha256`` (sha256 of the derived table's float64 little-endian bytes in
C order) are parameters in the group's JSON, which MANIFEST.json hashes: changing either changes the
vectors digest, and a derivation that no longer gives the certified table (another numpy, an edited
generator) is refused when the table is read (``table_of`` raises), never graded silently.

The stored ``table`` array of such a case is empty, shape (0, d_model): ``table_of`` gives the table.
"""

from __future__ import annotations

import functools
import hashlib

import numpy as np

from reference.golden.inputs import representable_inputs

SOURCE = "seed"  # the group parameter table_from of a case whose table is derived


def is_seeded(params) -> bool:
    """Whether a case's table is named by a seed (``table_from`` "seed") rather than stored."""
    return params.get("table_from") == SOURCE


def digest(table: np.ndarray) -> str:
    """sha256 hex of the table's float64 little-endian bytes, C order."""
    return hashlib.sha256(np.ascontiguousarray(table, dtype="<f8").tobytes()).hexdigest()


@functools.lru_cache(maxsize=8)
def _derived(seed: str, rows: int, width: int) -> np.ndarray:
    table = representable_inputs(seed, (rows, width), "table")
    table.setflags(write=False)  # shared by every reader of the cache
    return table


def derive(seed: str, rows: int, width: int) -> np.ndarray:
    """The table [rows, width] float64 named by ``seed`` (read-only; see the module docstring)."""
    if not isinstance(seed, str) or not seed:
        raise ValueError(f"table_seed: a non-empty string, got {seed!r}")
    return _derived(seed, int(rows), int(width))


def table_of(params, stored) -> np.ndarray:
    """The case's table: ``stored`` itself, or for a seeded case the derived one, checked against its
    ``table_sha256`` (ValueError naming the seed when the derivation no longer gives it)."""
    if not is_seeded(params):
        return stored
    stored = np.asarray(stored)
    if stored.size:
        raise ValueError(f"table: a seeded case stores no table (table_seed {params.get('table_seed')!r}), "
                         f"got shape {stored.shape}")
    table = derive(params.get("table_seed"), params["num_positions"], params["d_model"])
    if digest(table) != params.get("table_sha256"):
        raise ValueError(f"table_sha256: the table derived from table_seed {params['table_seed']!r} is not the "
                         "certified one (the derivation changed)")
    return table
