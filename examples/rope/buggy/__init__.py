"""Deliberately buggy RoPE adapters, one per diagnosis code (the file name is the code).

Every module is self-contained (it can be graded as ``examples/rope/buggy/<file>.py:apply``) and its
docstring says what the bug is and which code the runner should report.
"""
