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
    # --compile (conformance.compiled): the same case graded eagerly and under torch.compile
    "compile-fault": "correct eagerly, wrong under torch.compile: the compiled adapter fails or raises "
                     "where the eager one passes",
    # --grad (conformance.training): the gradient of an input graded against the reference backward
    "backward-transposed": "the gradient is the forward applied to the cotangent (R_m g instead of "
                           "R_m^T g = R_{-m} g): a hand-written backward that reuses the forward",
    "backward-layout": "the gradient pairs elements in the other layout than the forward "
                       "(half vs interleaved)",
    "backward-missing": "no gradient reaches an input: the output is detached, the gradient is None, "
                        "or it is zero where it should not be",
    "backward-scale": "the gradient has the right direction but the wrong amplitude (a factor of the "
                      "forward, e.g. the attention factor, missing or doubled in the backward only)",
}
