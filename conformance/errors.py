"""Exceptions a user's adapter may raise, and the runner's own user-facing errors."""


class Unsupported(Exception):
    """Raised by an adapter for a case its implementation cannot express: the case is skipped."""


class UsageError(Exception):
    """A mistake on the command line or in a target: reported as one line, exit code 2."""
