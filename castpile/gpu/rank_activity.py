"""What a rank thread of a one-GPU run is doing, in words, read off its Python stack: compiling, loading, waiting.

:class:`castpile.gpu.one_gpu.RankTimeout` names each rank still running with :func:`describe`
of its thread, innermost activity first::

    compiles kernel ring_put (Triton's compiler), launched at body.py:14 (in body)
    loads kernel ring_put's module onto the GPU, launched at body.py:14 (in body)
    prepares kernel ring_put's launch (Triton's JIT: arguments, specialisation), launched at body.py:14 (in body)
    waits for its stream's kernels (a kernel waiting for a signal no peer sends?), at body.py:19 (in body)

A rank at the launch gate (:mod:`castpile.gpu.launch_gate`) is described by the gate, which knows
which peers it waits for.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

from .hang_sites import callers, frame_path, library_dirs, user_frame

#: (file name ends with, function name) of the frames that say what a rank does, and the words for it.
ACTIVITIES = (
    (("compiler/compiler.py", "compile"), "compiles kernel {kernel} (Triton's compiler)"),
    (("compiler/compiler.py", "_init_handles"), "loads kernel {kernel}'s module onto the GPU"),
    (("runtime/jit.py", "run"), "prepares kernel {kernel}'s launch (Triton's JIT: arguments, specialisation)"),
    (
        ("torch/cuda/streams.py", "synchronize"),
        "waits for its stream's kernels (a kernel waiting for a signal no peer sends?)",
    ),
    (
        ("torch/cuda/__init__.py", "synchronize"),
        (
            "waits for the whole device (torch.cuda.synchronize: while ranks run, it waits for peers' kernels "
            "that wait for this rank)"
        ),
    ),
)


def _kernel_name(frames: list) -> str:
    """The name of the Triton kernel the innermost ``JITFunction.run`` on the stack launches ("?" if none)."""
    for f in frames:
        if f.f_code.co_name == "run" and Path(f.f_code.co_filename).as_posix().endswith("runtime/jit.py"):
            fn = f.f_locals.get("self")
            return str(getattr(fn, "__name__", None) or getattr(getattr(fn, "fn", None), "__name__", "?"))
    return "?"


def describe_frame(frame, library: tuple[str, ...] | None = None) -> str:
    """What the code at ``frame`` does, and the user's line it came from (see the module docstring)."""
    library = (*library_dirs(), str(Path(__file__).parent) + os.sep) if library is None else library
    frames = callers(frame)
    activity, at = "runs Python", frame
    for f in frames:
        path = Path(f.f_code.co_filename).as_posix()
        found = next(
            (words for (suffix, name), words in ACTIVITIES if f.f_code.co_name == name and path.endswith(suffix)), None
        )
        if found is not None:
            activity, at = found.format(kernel=_kernel_name(frames)), f
            break
    own = user_frame(at, library, skip=__file__)  # the user's frame that led there
    if own is None:
        return activity
    verb = "launched at" if activity.startswith(("compiles", "loads", "prepares")) else "at"
    return f"{activity}, {verb} {frame_path(own)}:{own.f_lineno} (in {own.f_code.co_name})"


def describe(thread: threading.Thread) -> str:
    """:func:`describe_frame` of ``thread``'s current frame ("has finished" once it has)."""
    frame = sys._current_frames().get(thread.ident) if thread.ident is not None else None
    return "has finished" if frame is None else describe_frame(frame)
