"""RoPE golden vectors, one module per job: ``notes`` (the flags, NOTES), ``records`` (RopeTest,
QkTest, rope_params), ``models`` (the model tables: MODELS, SCALED_MODELS, HEAD_DIMS), ``catalog``
(which cases exist, their parameters and why: groups()), ``fresh`` (the cases drawn at run time,
rope.apply's shape matrix) and ``protocols`` (the protocols' arrays and parameter schema, how inputs
are built and expected values computed and certified: PROTOCOLS). This package exports what the
registry (reference.golden.catalog) and the rest of posref read.

Read by the generic machinery in ``reference.golden`` (docs/design.md). A case id is
``<protocol>/<group>/<test>``; ids are part of the public contract (reviews cite them), so rename
nothing here without bumping the suite version. Sizes are kept small on purpose (2 to 4 heads, at
most 8 tokens per row, a few positions per long-context case): the conformance runner grades the
whole catalog in four dtypes in seconds, and vectors/ stays about a megabyte.

Every test carries a comment that says why it exists, and flags; ``NOTES`` explains each flag
(Wycheproof style: bugType, description, links).

Protocols and arrays (r = rotary_dim):

- ``rope.apply``        ``x`` [b, s, h, head_dim], ``positions`` int64 [b, s], ``expected``
                        [b, s, h, head_dim];
- ``rope.cache``        ``positions`` int64 [b, s], ``cos`` and ``sin`` [b, s, r/2] in pair order
                        (pair i turns by positions * theta_i, whatever the layout);
- ``rope.frequencies``  ``inv_freq`` [r/2] and ``attention_factor`` (0-d);
- ``rope.apply_qk``     ``q`` [b, s, h, head_dim], ``k`` [b, s, kv_heads, head_dim], ``positions``
                        int64 [b, s], ``q_expected`` and ``k_expected`` like q and k;
- ``rope.cp_positions`` and ``rope.cp_apply``: a context-parallel rank's tokens of a packed batch
                        (reference/rope/cp_vectors.py).
"""

from reference.golden.shapes import DECODE_BATCHES, TAIL_LENGTHS, TILE_LENGTHS

from .catalog import groups
from .fresh import (ALWAYS_KINDS, SAMPLE_KINDS, _fresh_rotations, fresh_apply, fresh_apply_qk,  # noqa: F401
                    fresh_frequencies, shape_matrix)
from .models import HEAD_DIMS, MODELS, SCALED_MODELS
from .notes import NOTES
from .protocols import PARAMS_SCHEMA, PROTOCOLS
from .records import LAYOUT_FLAG, QkTest, RopeTest, rope_params

__all__ = ["ALWAYS_KINDS", "DECODE_BATCHES", "HEAD_DIMS", "LAYOUT_FLAG", "MODELS", "NOTES", "PARAMS_SCHEMA",
           "PROTOCOLS", "QkTest", "RopeTest", "SAMPLE_KINDS", "SCALED_MODELS", "TAIL_LENGTHS", "TILE_LENGTHS",
           "fresh_apply", "fresh_apply_qk", "fresh_frequencies", "groups", "rope_params", "shape_matrix"]
