"""Bug: padding tokens (slot -1) written into the cache.

The batch is padded to a fixed size (CUDA graphs) and its padding tokens carry slot -1; the write
``flat[slot_mapping] = rows`` indexes with -1 like Python does, so every padding token lands on the
cache's last slot, which belongs to some other (or no) sequence. Expected diagnosis:
``kv-padding-written``.
"""

from pathlib import Path

from conformance.loader import load_target

CODE = "kv-padding-written"
PROTOCOL = "rope.kv_write"

_EXAMPLE = Path(__file__).resolve().parents[1] / "kv_write.py"
rotate, write_cache = (load_target(f"{_EXAMPLE}:{name}") for name in ("rotate", "write_cache"))


def _write(cache, rows, slot_mapping):
    cache.view(-1, *cache.shape[-2:])[slot_mapping] = rows  # BUG: slot -1 is the last slot, not "skip"


def kv_write(q, k, v, positions, k_cache, v_cache, slot_mapping, spec):
    _write(k_cache, rotate(k, positions, spec), slot_mapping)
    _write(v_cache, v, slot_mapping)
    return rotate(q, positions, spec)
