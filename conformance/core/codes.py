"""The diagnosis codes every family shares: what the runner's validation, the invoker and the
generic black-box checks report. Each family adds its own (``Family.codes``)."""

CORE_CODES = {
    "input-mutated": "the implementation wrote into an input tensor",
    "dtype-changed": "the output's dtype (or device) differs from the input's, or has no budget",
    "shape-changed": "the output is not a tensor of the expected shape",
    "non-finite": "NaN or Inf where the reference is finite, or a NaN input that did not propagate",
    "raised": "the adapter raised an exception",
    "crashed": "the isolated process died during the call",
    "timeout": "the call did not return within the time limit",
    "not-deterministic": "the same call twice gave different values",
}
