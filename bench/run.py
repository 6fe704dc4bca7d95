"""Benchmark: posref's reference next to torch eager and a memory copy, in one table.

    python bench/run.py [--repeat 5] [--json posref-bench.json] [--skip-slow] [--backends cpu,numpy,cuda]
                        [--full] [--cache-positions 1048576]
                        [--families yes|no|only]

The same as ``posref bench`` (the implementation is conformance/commands/bench.py, so that the
installed command has it too); see its docstring for the workloads, the rows and the targets.
docs/performance.md records a run.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from conformance.commands.bench import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
