"""Exceptions a user's adapter may raise, and the runner's own user-facing errors."""


class Unsupported(Exception):
    """Raised by an adapter for a case its implementation cannot express: the case is skipped."""


class UsageError(Exception):
    """A mistake on the command line or in a target: reported as one line, exit code 2."""


def did_you_mean(word, choices) -> str:
    """" (did you mean 'apply'?)" for the closest choice to a misspelled word, else ""."""
    import difflib

    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
