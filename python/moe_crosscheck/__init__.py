"""Independent numpy cross-check of the moe-mlir reference model.

Written from SPEC.md and docs/numerics.md, not from the C++ sources, so that
the two implementations can only agree by both following the contract:

* ``mx``      MX (MXFP8) block quantization with ml_dtypes' FP8 casts
* ``routing`` the blocked routing layout builder
* ``router``  router forward (top-k + softmax) and backward
* ``layer``   the layer backward in fp64 (R_64) and MX-emulated (R_mx)
* ``suites``  drivers that run ``moe-ref`` and compare its files with these
* ``torch_ref``   R_mx and R_64 in torch (GPU-sized layers, no ml_dtypes)
* ``torch_check`` the torch commands: torch-check, torch-selfcheck, torch-gen

Run ``python3 -m moe_crosscheck --help``.
"""
