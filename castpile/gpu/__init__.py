"""The GPU runtime: symmetric memory, bound launches, the CPU multi-rank simulator, collectives.

Nothing here imports the compiler: the GPU machines need only torch and triton,
and the collectives import their kernels already transpiled
(``collectives/kernels_triton.py``, made by ``make generated``).
"""
