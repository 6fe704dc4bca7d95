"""posref conformance: grade a third-party PyTorch implementation against the golden vectors.

Public names: ``Unsupported`` (raise it in an adapter to skip a case), ``RopeSpec``,
``assert_conforms`` and ``run_conformance``. torch is imported lazily, only when grading.
"""

from conformance.errors import Unsupported, UsageError
from conformance.spec import RopeSpec

__all__ = ["Unsupported", "UsageError", "RopeSpec", "assert_conforms", "run_conformance"]


def __getattr__(name):
    if name in ("assert_conforms", "run_conformance"):
        from conformance import api

        return getattr(api, name)
    raise AttributeError(name)
