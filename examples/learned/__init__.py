"""Learned absolute position embeddings (BERT, GPT-2, RoBERTa) written as users write them.

Each module exposes the adapter of protocol ``learned.lookup`` (docs/design.md, "Protocols"):

    lookup(x, positions, table, spec)   x [batch, seq, d_model], positions int64 [batch, seq],
                                        table [num_positions, d_model]; returns x + table[row]

``spec`` is a ``conformance.LearnedSpec`` (num_positions, d_model, variant, padding_idx). Grade
one with ``posref conform examples/learned/gpt2_wpe.py:lookup --protocol learned.lookup``. The
modules in ``buggy/`` each carry one bug; their docstrings name the diagnosis code the runner
should report.
"""
