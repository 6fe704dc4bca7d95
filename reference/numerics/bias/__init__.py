"""reference.numerics.bias: the additive position biases in float64, one module per formula, shared by
their own families and by the attention composite (reference.attention adds each bias to its logits,
and differentiates FIRE's), so that no family imports another family's modules.

- alibi.py (+ alibi_cpu_kernels.py, alibi_cuda_kernels.py, alibi_oracle.py): ALiBi's slopes and
  bias (reference.alibi states the formula);
- kerple.py (+ kerple_cpu_kernels.py, kerple_cuda_kernels.py, kerple_oracle.py): KERPLE's clamps,
  checks and bias (reference.kerple);
- fire.py, fire_backward.py (+ fire_cpu_kernels.py, fire_cuda_kernels.py, fire_oracle.py): FIRE's
  weight checks, constants, bias, and its features, VJP, JVP and VJP bound (reference.fire);
- t5.py (+ t5_cpu_kernels.py, t5_oracle.py): T5's bucket rule and its configuration check
  (reference.t5);
- golden quick phases (issue 31): alibi_golden.py, kerple_golden.py, fire_golden.py, on the
  double-double log1p/exp and rounding test of dd_elementary.py; golden_table.py gathers
  per-distance golden values (ALiBi, KERPLE).

Each family package re-exports its public names from here; the mpmath oracles (``*_oracle.py``)
stay independent readings of the formula (no code shared with the module they certify). Importing
this package imports nothing; kernel modules (Numba, numba.cuda) are imported on first use of their
backend. Never imports torch.
"""
