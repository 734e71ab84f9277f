"""The GPU runtime: symmetric memory, bound launches, the CPU multi-rank simulator, collectives.

Nothing here imports the compiler: the GPU machines need only torch and triton,
and the collectives import their kernels already transpiled
(``collectives/kernels_triton.py``, made by ``make generated``).

:class:`HangError` and :func:`check_waits` (:mod:`.wait_deadlines`) report the waits of kernels
transpiled with ``CASTPILE_DEBUG_WAITS`` that gave up: ``check_waits()`` after synchronising raises
for those recorded so far (``one_gpu.run`` calls it for its ranks).
"""

from .wait_deadlines import HangError, check as check_waits

__all__ = ["HangError", "check_waits"]
