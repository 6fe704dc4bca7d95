"""posref reference: float64 ground truth for Transformer positional encodings.

Never imports torch. Families live in subpackages (``reference.rope``, ...); the identity registry
in ``reference.identities``; golden-vector generation and storage in ``reference.golden``.
"""

__version__ = "0.1.0"
