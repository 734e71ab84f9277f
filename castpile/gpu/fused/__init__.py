"""Fused communication kernels: all-reduce + RMSNorm (``rmsnorm``), MoE (``moe``), tensor-parallel GEMMs (``tp_gemm``).

Like the collectives, each module's kernels are written in the castpile language
(``*_kernels.py``) and imported already transpiled (``*_kernels_triton.py``, made
by ``make generated``; the TP GEMMs' GEMM core is plain Triton); the host wrappers
prepare their launches once.  The ops with state make it as ``state`` describes.
"""
