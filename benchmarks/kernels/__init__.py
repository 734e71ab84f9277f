"""The benchmarks' kernels: castpile-language sources, their transpiled modules, hand-written and Helion twins.

``stack_kernels.py`` and ``nvshmem_kernels.py`` are in the castpile
language; ``generated/`` holds what castpile writes for them (``make generated`` rewrites it,
tests/test_generated.py checks it is current), so the GPU machines need triton but
not libcst.  ``hand_kernels.py`` is the same work by hand in Triton,
``helion_kernels.py`` in Helion.
"""
