"""posref conformance: grade a third-party PyTorch implementation against the golden vectors.

Public names: ``Unsupported`` (raise it in an adapter to skip a case), ``assert_conforms`` and
``run_conformance``, ``cases`` (one pytest item per case, conformance.pytest_cases), and each
family's spec class (``RopeSpec``, ...), found through the family
registry (conformance.core.registry). torch is imported lazily, only when grading.
"""

from conformance.errors import Unsupported, UsageError

__all__ = ["Unsupported", "UsageError", "assert_conforms", "cases", "run_conformance"]


def __getattr__(name):
    if name in ("assert_conforms", "run_conformance"):
        from conformance import api

        return getattr(api, name)
    if name == "cases":
        from conformance.pytest_cases import cases

        return cases
    if not name.startswith("_"):
        from conformance.core import registry

        return registry.export(name)
    raise AttributeError(name)
