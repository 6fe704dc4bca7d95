"""Bug: the keys are written into the paged cache before RoPE.

The layer appends k and v to the cache first and rotates q and k afterwards (an ordering that is
right only for caches that store unrotated keys and rotate at attention time), so the cache holds k
as it came in. q comes back right. Expected diagnosis: ``kv-written-unrotated``.
"""

from pathlib import Path

from conformance.loader import load_target

CODE = "kv-written-unrotated"
PROTOCOL = "rope.kv_write"

_EXAMPLE = Path(__file__).resolve().parents[1] / "kv_write.py"
rotate, write_cache = (load_target(f"{_EXAMPLE}:{name}") for name in ("rotate", "write_cache"))


def kv_write(q, k, v, positions, k_cache, v_cache, slot_mapping, spec):
    write_cache(k_cache, k, slot_mapping)  # BUG: written before the rotation below
    write_cache(v_cache, v, slot_mapping)
    k = rotate(k, positions, spec)
    return rotate(q, positions, spec)
