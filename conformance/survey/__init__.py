"""``posref survey``: every bundled library adapter graded on every protocol it declares.

- discover.py reads the declarations of the adapter modules (``examples/<family>/*.py``):
  ``LIBRARY``, ``SURVEY`` and the optional ``SURVEY_NOTES``, from their source, without importing
  them (a library that is absent must not stop the survey);
- grade.py grades each row in a supervised ``posref conform`` process of its own
  (conformance.commands.project's), two at a time, and turns its report into a cell: passed,
  acceptable, failed (the diagnosis codes), unsupported, error or not installed;
- matrix.py writes the cells as Markdown (docs/compatibility.md) and JSON, with a sentence for
  every cell that does not pass.
"""
