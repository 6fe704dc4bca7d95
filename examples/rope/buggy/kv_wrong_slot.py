"""Bug: k and v written at slot = token index, as into a contiguous cache: slot_mapping (and the
block tables behind it) never read.

Code written for a contiguous per-batch cache (``cache[:t] = k``) and moved to a paged cache keeps
writing token i to row i of the flattened cache; with blocks handed out in any order, the rows land
in the wrong blocks. Expected diagnosis: ``kv-wrong-slot``.
"""

from pathlib import Path

import torch

from conformance.loader import load_target

CODE = "kv-wrong-slot"
PROTOCOL = "rope.kv_write"

_EXAMPLE = Path(__file__).resolve().parents[1] / "kv_write.py"
rotate, write_cache = (load_target(f"{_EXAMPLE}:{name}") for name in ("rotate", "write_cache"))


def _write(cache, rows, slot_mapping):
    real = slot_mapping >= 0
    tokens = torch.arange(rows.shape[0], device=rows.device)  # BUG: the token's index, not slot_mapping[i]
    cache.view(-1, *cache.shape[-2:]).index_copy_(0, tokens[real], rows[real])


def kv_write(q, k, v, positions, k_cache, v_cache, slot_mapping, spec):
    _write(k_cache, rotate(k, positions, spec), slot_mapping)
    _write(v_cache, v, slot_mapping)
    return rotate(q, positions, spec)
