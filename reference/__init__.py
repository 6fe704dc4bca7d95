"""posref reference: float64 ground truth for Transformer positional encodings.

Never imports torch. Each family lives in one subpackage (``reference.rope``, ...) with its math,
kernels, oracle, identities and vector catalog; ``reference.families`` discovers them. Shared by
every family: the family-free numerics (``reference.numerics``: input checks, the exact phase and
frequency tables, double-double arithmetic, kernels, the rotation by a frequency ladder), the
identity registry (``reference.identities``) and the golden-vector machinery (``reference.golden``).
docs/design.md describes the layout.
"""

__version__ = "0.5.0"
