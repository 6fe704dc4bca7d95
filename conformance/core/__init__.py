"""The family-free parts of conformance (docs/design.md): the protocol base and its hooks
(``protocol``), family declaration and discovery (``family``, ``registry``), the core diagnosis
codes (``codes``), generic tolerance units and ratios (``tolerance``), tensor helpers
(``tensors``), the mutant search (``mutants``), the black-box helpers (``blackbox``) and the
per-profile grading loop (``grading``).

The layer the rotary families share (rope, gaussian_rope, mrope, rope2d, xpos; nope and learned
use its backward pieces), so that no family imports another: the rotation budgets
(``rotation_budgets``), RopeSpec and the tensor layouts (``rotation_spec``), the cached float64
rotation tables (``rotation_reference``), rope.apply's grading shared with gaussian_rope.apply
(``rotation_apply``), the pair-layout probe (``layout_probe``), the family-free pieces of a
gradient's grading (``rotation_backward``); and the sinusoid table budgets that sinusoidal and
transformer_xl share (``sinusoid_budgets``)."""
