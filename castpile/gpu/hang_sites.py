"""Where a hung simulated rank is: the ``path:line`` of the ``castpile.wait`` it spins in, read off its Python stack.

Under the Triton interpreter a kernel is Python code: a rank spinning in a wait has the
kernel's frame on its stack, calling castpile's wait helper (``_castpile_wait...``, copied
into every transpiled module).  Transpiling keeps every line at its number, so the kernel
frame's line is the line of the ``castpile.wait`` the user wrote.  Its path is the module's
``__file__``: the user's file for a module the import hook loaded (whose code names the
cache entry), the transpiled file itself for one the command line wrote.

:func:`install_reporter` makes a forked rank answer ``SIGUSR1`` by writing
:func:`describe` of where it is to a pipe; :mod:`castpile.gpu.sim` asks every rank still
running when its timeout passes, before it kills them.
"""

from __future__ import annotations

import os
import signal
import sysconfig
from pathlib import Path

import numpy as np

#: Prefix of the helpers castpile copies into transpiled modules.
HELPER_PREFIX = "_castpile_"
#: Helpers that spin, by name prefix, and what the user wrote to get them.
SPINNERS = {"_castpile_wait": "castpile.wait", "_castpile_signal": "castpile.signal(wait_for=...)"}
#: The signal a rank answers with its whereabouts.
REPORT_SIGNAL = signal.SIGUSR1


def library_dirs() -> tuple[str, ...]:
    """Directories whose frames are never the user's: Python's own, triton's, torch's, numpy's, this module's."""
    import numpy
    import torch
    import triton

    dirs = {
        sysconfig.get_paths()["stdlib"],
        *(str(Path(m.__file__).parent) for m in (numpy, torch, triton) if m.__file__ is not None),
    }
    return tuple(sorted(d + os.sep for d in dirs))


def frame_path(frame) -> str:
    """The file the user wrote for ``frame``: its module's ``__file__`` (the hook's cache entry maps back there)."""
    path = frame.f_globals.get("__file__")
    return path if isinstance(path, str) and path.endswith(".py") else frame.f_code.co_filename


def callers(frame) -> list:
    """``frame`` and its callers, innermost first."""
    frames = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    return frames


def _internal(frame, library: tuple[str, ...]) -> bool:
    return frame.f_code.co_name.startswith(HELPER_PREFIX) or frame.f_code.co_filename.startswith(library)


def user_frame(frame, library: tuple[str, ...], skip: str = ""):
    """The innermost of ``frame`` and its callers that is the user's: in no castpile helper, library or ``skip`` file."""
    for f in callers(frame):
        if f.f_code.co_filename not in (__file__, skip) and not _internal(f, library):
            return f
    return None


def _data(value):
    """The numpy data of an interpreter value (a ``tl.tensor``, its handle, or a Python number)."""
    value = getattr(value, "handle", value)
    return getattr(value, "data", value)


def _flag_values(frame) -> str:
    """``": waits for flag CMP VALUE; saw [...]"`` for the frame of the wait helper that spins, else ``""``."""
    if not frame.f_code.co_name.startswith("_castpile_wait"):
        return ""
    names = frame.f_locals
    if "seen" not in names or "pending" not in names:
        return ""
    try:
        seen, pending = _data(names["seen"]), _data(names["pending"])
        shown = [v.item() for v in np.asarray(seen)[np.broadcast_to(np.asarray(pending, bool), np.shape(seen))]]
        cmp = _data(names.get("cmp", "eq"))
        cmp = "ge" if bool(_data(names.get("decrement", False))) else getattr(cmp, "value", cmp)
        wanted = np.asarray(_data(names.get("value", 1))).ravel().tolist()
    except Exception:  # a frame that is not as expected gives no values, never a failure
        return ""
    wanted_text = wanted[0] if len(set(wanted)) == 1 else wanted
    return f": waits for flag {cmp} {wanted_text}; saw {shown[:16]}{' ...' if len(shown) > 16 else ''}"


def describe(frame, library: tuple[str, ...] | None = None) -> str:
    """Where the code at ``frame`` is, in words for :class:`castpile.gpu.sim.RankTimeout`.

    In a spinning castpile helper: ``spins in castpile.wait at path:line (kernel name)``, the
    kernel frame that called the outermost helper.  Elsewhere: ``was at path:line (in name),
    in no castpile wait``, the innermost frame outside Python's, triton's, torch's and numpy's
    code and this module.
    """
    library = library_dirs() if library is None else library
    here = __file__
    frames = [f for f in callers(frame) if f.f_code.co_filename != here]
    spinning = None
    values = ""
    for f in frames:
        name = f.f_code.co_name
        spinner = next((words for prefix, words in SPINNERS.items() if name.startswith(prefix)), None)
        if spinner is not None:
            spinning = spinner
            values = values or _flag_values(f)
        if not _internal(f, library):
            if spinning is not None:
                return f"spins in {spinning} at {frame_path(f)}:{f.f_lineno} (kernel {name}){values}"
            return f"was at {frame_path(f)}:{f.f_lineno} (in {name}), in no castpile wait"
    return "was in library code alone (no frame of its own code on the stack)"


def install_reporter(fd: int) -> None:
    """Answer :data:`REPORT_SIGNAL` by writing one line, :func:`describe` of the interrupted frame, to ``fd``."""
    library = library_dirs()

    def report(signum, frame):
        try:
            text = describe(frame, library)
        except Exception as exc:  # a report that fails must not change what the rank does
            text = f"could not say where it was ({type(exc).__name__}: {exc})"
        os.write(fd, text.encode("utf-8", "replace") + b"\n")

    signal.signal(REPORT_SIGNAL, report)
