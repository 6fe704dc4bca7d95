"""The family-free parts of conformance (docs/design.md): the protocol base and its hooks
(``protocol``), family declaration and discovery (``family``, ``registry``), the core diagnosis
codes (``codes``), generic tolerance units and ratios (``tolerance``), tensor helpers
(``tensors``), the mutant search (``mutants``) and the black-box helpers (``blackbox``)."""
