"""A registry of mathematical identities that the float64 references satisfy (or violate by design).

Each :class:`Identity` names one identity: an ``id`` such as ``rope.relative-position``, the
``family`` it belongs to, a one-line ``statement``, a ``check`` that evaluates it on the reference
and returns its largest residual (a float), the ``bound`` that residual must stay under, and what
we ``expect``: ``"holds"`` or ``"violated-by-design"`` (e.g. Gaussian-kernel RoPE is not shift
invariant, on purpose). The bound's justification is written in the check's docstring.

Each family keeps its identities in its own folder, ``reference/<family>/identities.py``, which
registers them at import time with :func:`register`. Families are discovered
(``reference.families``), so a new family adds its module and edits nothing here. The registry
itself is the module-level dict ``REGISTRY``, keyed by id (the shape of HF's one-dict registries
such as ``ROPE_INIT_FUNCTIONS``).

:func:`run_identities` evaluates them and grades each one:

* ``holds``               expected to hold and ``residual <= bound``;
* ``violated-by-design``  expected to be violated and ``residual > bound`` (it really is violated);
* ``failing``             anything else, including a check that raised or returned NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional

from reference import families as discovered

__all__ = [
    "EXPECTS",
    "VERDICTS",
    "Identity",
    "REGISTRY",
    "register",
    "families",
    "load_all",
    "grade",
    "run_identity",
    "run_identities",
]

EXPECTS = ("holds", "violated-by-design")
VERDICTS = ("holds", "violated-by-design", "failing")

REGISTRY: dict = {}  # id -> Identity, in registration order


@dataclass(frozen=True)
class Identity:
    """One identity: ``check()`` returns the largest residual, graded against ``bound``."""

    id: str
    family: str
    statement: str
    check: Callable[[], float]
    bound: float
    expect: str = "holds"

    def __post_init__(self):
        if not self.family or not self.id.startswith(self.family + "."):
            raise ValueError(f"id: {self.id!r} must start with its family {self.family!r} and a dot")
        if not self.statement or "\n" in self.statement:
            raise ValueError(f"statement: {self.id} needs a non-empty one-line statement")
        if not callable(self.check):
            raise ValueError(f"check: {self.id} needs a callable check")
        if not (isinstance(self.bound, (int, float)) and math.isfinite(self.bound) and self.bound >= 0):
            raise ValueError(f"bound: {self.id} needs a finite non-negative bound, got {self.bound!r}")
        if self.expect not in EXPECTS:
            raise ValueError(f"expect: {self.id} has {self.expect!r}; use one of {', '.join(EXPECTS)}")


def register(identity: Optional[Identity] = None, *, id: Optional[str] = None, statement: str = "",
             bound: Optional[float] = None, expect: str = "holds", family: Optional[str] = None):
    """Add an identity to ``REGISTRY``.

    Two forms::

        register(Identity(...))                      # function form, returns the Identity

        @register(id="rope.orthogonality", statement="R_m^T R_m = I", bound=1e-15)
        def orthogonality() -> float: ...            # decorator form, returns the check unchanged

    ``family`` defaults to the part of ``id`` before the first dot. Registering a second identity
    under an existing id raises ValueError, unless it comes from the same function (a re-import).
    """
    if identity is not None:
        _add(identity)
        return identity
    if id is None or bound is None:
        raise ValueError("id: register() needs an Identity or id=, statement= and bound=")

    def decorate(check):
        _add(Identity(id=id, family=family or id.split(".", 1)[0], statement=statement,
                      check=check, bound=float(bound), expect=expect))
        return check

    return decorate


def _add(identity: Identity) -> None:
    old = REGISTRY.get(identity.id)
    if old is not None and _origin(old.check) != _origin(identity.check):
        raise ValueError(f"id: identity {identity.id!r} is already registered")
    REGISTRY[identity.id] = identity


def _origin(fn) -> tuple:
    """Where a check was defined: the same place again means a module re-import, not a clash."""
    code = getattr(fn, "__code__", None)
    return (getattr(fn, "__module__", None), getattr(fn, "__qualname__", repr(fn)),
            getattr(code, "co_filename", None), getattr(code, "co_firstlineno", None))


def load_all() -> None:
    """Import every family's identities module so that each registers its identities."""
    for name in discovered.names():
        discovered.part(name, "identities")


def families() -> list:
    """Sorted names of the families with at least one registered identity."""
    load_all()
    return sorted({identity.family for identity in REGISTRY.values()})


def grade(expect: str, residual: float, bound: float) -> str:
    """The verdict for one evaluated identity (NaN never holds and is never a violation)."""
    if expect == "holds" and residual <= bound:
        return "holds"
    if expect == "violated-by-design" and residual > bound:
        return "violated-by-design"
    return "failing"


def run_identity(identity: Identity) -> dict:
    """Evaluate one identity. Keys: id, family, statement, residual, bound, verdict, error.

    ``error`` is None, or a one-line ``Type: message`` when the check raised (residual NaN then).
    """
    error = None
    try:
        residual = float(identity.check())
    except Exception as exc:  # a broken check is reported as failing, not raised
        residual = math.nan
        error = f"{type(exc).__name__}: {exc}".splitlines()[0]
    return {
        "id": identity.id,
        "family": identity.family,
        "statement": identity.statement,
        "residual": residual,
        "bound": float(identity.bound),
        "verdict": grade(identity.expect, residual, identity.bound),
        "error": error,
    }


def run_identities(family: Optional[str] = None) -> list:
    """Evaluate every registered identity (or one family's), grouped by family in sorted order.

    Returns one dict per identity (see :func:`run_identity`). An unknown ``family`` raises
    ValueError naming the known families.
    """
    known = families()
    if family is not None and family not in known:
        raise ValueError(f"family: unknown family {family!r}; known families: {', '.join(known)}")
    chosen = [i for i in REGISTRY.values() if family is None or i.family == family]
    chosen.sort(key=lambda i: i.family)  # stable: keeps registration order within a family
    return [run_identity(identity) for identity in chosen]
