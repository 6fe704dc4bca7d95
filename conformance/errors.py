"""Exceptions a user's adapter may raise, and the runner's own user-facing errors."""


class Unsupported(Exception):
    """Raised by an adapter for a case its implementation cannot express: the case is skipped."""


class UsageError(Exception):
    """A mistake on the command line or in a target: reported as one line, exit code 2."""


def did_you_mean(word, choices) -> str:
    """" (did you mean 'apply'?)" for the closest choice to a misspelled word, else "".

    Case is ignored first: a choice equal to the word but for case is the answer ("RoPE.apply"
    is 'rope.apply', not the nearer spelling 'xpos.apply', issue 25); otherwise the closest
    choice, compared in lower case."""
    import difflib

    by_lower: dict = {}
    for choice in (str(c) for c in choices):
        by_lower.setdefault(choice.lower(), choice)
    key = str(word).lower()
    if key in by_lower:
        return f" (did you mean {by_lower[key]!r}?)"
    close = difflib.get_close_matches(key, list(by_lower), n=1, cutoff=0.6)
    return f" (did you mean {by_lower[close[0]]!r}?)" if close else ""
