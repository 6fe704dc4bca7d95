"""Small PyTorch implementations written for posref, one folder per family: correct ones in
``examples/<family>/`` and deliberately buggy ones, one per diagnosis code, in
``examples/<family>/buggy/``.

Grade one with ``posref conform examples/rope/hf_rotate_half.py:apply --protocol rope.apply``.
"""
