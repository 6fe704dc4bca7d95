"""T5's bucket rule: reference.numerics.bias.t5, shared with the attention composite.
This path is an alias of that very module, not a copy of its names: its private table
cache and ``_one`` (tests/t5/test_t5_kernel.py patches it) are the ones ``bucket`` uses."""

import sys

from reference.numerics.bias import t5

sys.modules[__name__] = t5
