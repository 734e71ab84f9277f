"""Deep stacks: run work in a thread whose C stack and recursion limit fit a nesting depth.

libcst's parser and its conversion to Python objects recurse natively, one level
per level of nesting, and castpile's walks recurse a few Python frames per level:
given the depth :mod:`castpile.compiler.parse` measured, no input overflows the
stack and crashes the process.
"""

from __future__ import annotations

import sys
import threading

# The worker thread's C stack: a base, and an allowance per level of nesting.
_STACK_BASE = 32 << 20
_STACK_PER_LEVEL = 4 << 10
# Python frames per level of nesting, and the least limit.
_FRAMES_PER_LEVEL = 16
_RECURSION_LIMIT = 8000


def on_deep_stack(work, levels: int):
    """``work()``, run in a thread with a C stack and a recursion limit for ``levels``
    levels of nesting: its result, or its exception raised here."""
    outcome: list = []

    def run():
        try:
            outcome.append((True, work()))
        except BaseException as exc:  # handed to the calling thread
            outcome.append((False, exc))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, _RECURSION_LIMIT, levels * _FRAMES_PER_LEVEL))
    try:
        previous = threading.stack_size(_STACK_BASE + levels * _STACK_PER_LEVEL)
        try:
            worker = threading.Thread(target=run, name="castpile-transpile", daemon=True)
            worker.start()
        finally:
            threading.stack_size(previous)
        worker.join()
    finally:
        sys.setrecursionlimit(limit)
    succeeded, value = outcome[0]
    if succeeded:
        return value
    raise value
