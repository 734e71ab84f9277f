"""Atomic file writes: a temporary file beside the target, then a rename.

A reader sees the old file or the whole new one, never a part; a failed write
leaves no temporary file behind::

    write_atomically("out.py", b"x = 1\\n")                   # mode of the old file, else 0666 & ~umask
    write_atomically(entry, data, mode=0o600, prefix=".tmp-")  # the import hook's cache
"""

from __future__ import annotations

import itertools
import os

MAX_SOURCE_BYTES = 64 * 1024 * 1024
"""The command line refuses larger inputs (exit 2) rather than risk exhausting memory."""

_names = itertools.count()


def write_atomically(target, data: bytes, *, mode: int | None = None, prefix: str = ".") -> None:
    """Write ``data`` to ``target`` through ``<dir>/<prefix><name>.<pid>.<n>.tmp`` and a rename."""
    directory, name = os.path.split(os.fspath(target))
    while True:
        tmp = os.path.join(directory, f"{prefix}{name}.{os.getpid()}.{next(_names)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        if mode is None:
            if os.path.exists(target):
                mode = os.stat(target).st_mode & 0o7777
            else:
                umask = os.umask(0)
                os.umask(umask)
                mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
