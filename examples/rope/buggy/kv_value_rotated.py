"""Bug: v rotated like k before it is written.

A fused kernel that loops over "k and v" with the same body rotates both; the value cache then
holds rotated values (q and the keys are right). Expected diagnosis: ``kv-value-rotated``.
"""

from pathlib import Path

from conformance.loader import load_target

CODE = "kv-value-rotated"
PROTOCOL = "rope.kv_write"

_EXAMPLE = Path(__file__).resolve().parents[1] / "kv_write.py"
rotate, write_cache = (load_target(f"{_EXAMPLE}:{name}") for name in ("rotate", "write_cache"))


def kv_write(q, k, v, positions, k_cache, v_cache, slot_mapping, spec):
    write_cache(k_cache, rotate(k, positions, spec), slot_mapping)
    write_cache(v_cache, rotate(v, positions, spec), slot_mapping)  # BUG: v is rotated too
    return rotate(q, positions, spec)
