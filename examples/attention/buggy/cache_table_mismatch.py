"""Bug (vLLM #27414): LongRoPE's table chosen per call by the call's own positions, the keys
cached after RoPE: the prompt's keys are rotated with the short factors, and once the length
passes original_max_position_embeddings the queries use the long factors against them.

Adapter: decode (attention.decode). Expected diagnosis: ``cache-table-mismatch``.
"""

from pathlib import Path

from conformance.loader import load_target

CODE = "cache-table-mismatch"
PROTOCOL = "attention.decode"
OPTIONS = {"cases": "attention.decode/*/longrope-recompute"}

# The same layer as cache_stale_base.py (keys rotated once with their call's table), on LongRoPE.
decode = load_target(f"{Path(__file__).resolve().parent / 'cache_stale_base.py'}:decode")
