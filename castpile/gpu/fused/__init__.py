"""Fused communication kernels: all-reduce with residual and RMSNorm (``rmsnorm``), MoE dispatch and combine (``moe``).

Like the collectives, each module's kernels are written in the castpile language
(``*_kernels.py``) and imported already transpiled (``*_kernels_triton.py``, made
by ``make generated``); the host wrappers prepare their launches once.
"""
