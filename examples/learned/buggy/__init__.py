"""Deliberately buggy learned-lookup adapters, one per diagnosis code (the file name is the code).

Every module is self-contained (it can be graded as ``examples/learned/buggy/<file>.py:lookup``)
and its docstring says what the bug is and which code the runner should report.
"""
