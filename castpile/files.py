"""Safe output files: each replaced whole, several all or nothing, special files written through.

A reader sees the old file or the whole new one, never a part.  A failed or
interrupted write (an error, Ctrl-C, SIGTERM) leaves no temporary file behind and
undoes the renames it had done::

    write_atomically("out.py", b"x = 1\\n")                   # mode of the old file, else 0666 & ~umask
    write_atomically(entry, data, mode=0o600, prefix=".tmp-")  # the import hook's cache
    write_outputs([("out/a.py", a), ("/dev/null", b)])         # the command line's outputs
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import stat

MAX_SOURCE_BYTES = 64 * 1024 * 1024
"""The command line refuses larger inputs (exit 2) rather than risk exhausting memory."""

_names = itertools.count()


def write_atomically(target, data: bytes, *, mode: int | None = None, prefix: str = ".") -> None:
    """Write ``data`` to ``target`` through ``<dir>/<prefix><name>.<pid>.<n>.tmp`` and a rename."""
    with _Staging(prefix) as staging:
        staging.add(target, data, mode)
        staging.commit()


def write_outputs(outputs: list[tuple[str, bytes]]) -> None:
    """Write every ``(path, data)``: all of them or, on any failure, none.

    A FIFO or device (anything that exists and is neither a regular file nor a
    directory) is written through: opened and written, never replaced.  That
    happens once every other output is staged, and cannot be undone."""
    with _Staging(".") as staging:
        special = []
        for path, data in outputs:
            if _is_special(path):
                special.append((path, data))
            else:
                staging.add(path, data)
        for path, data in special:
            with _naming(path), open(os.open(path, os.O_WRONLY), "wb") as f:
                f.write(data)
        staging.commit()


def _is_special(path) -> bool:
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


class _Staging:
    """Temporary files beside their targets, renamed over them together by :meth:`commit`.

    Leaving the ``with`` block before :meth:`commit` has finished removes every
    temporary file and undoes the renames already done (a replaced file comes back
    from a hard link kept until then; a new one is removed).  Meanwhile SIGTERM, if
    at its default, raises ``SystemExit(128 + SIGTERM)`` so that this happens first."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.staged: list[tuple[str, str]] = []  # (target, temporary)
        self.renamed: list[tuple[str, bool, str | None]] = []  # (target, existed, backup)
        self.leftovers: list[str] = []  # temporaries and backups, removed on leaving
        self.committed = False

    def __enter__(self) -> _Staging:
        self.handles_sigterm = signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
        if self.handles_sigterm:
            try:
                signal.signal(signal.SIGTERM, _exit_on_sigterm)
            except ValueError:  # not the main thread, where alone handlers run
                self.handles_sigterm = False
        return self

    def add(self, target, data: bytes, mode: int | None = None) -> None:
        """Write ``data`` to a new temporary file beside ``target``."""
        target = os.fspath(target)
        with _naming(target):
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
            temporary, fd = self._fresh(target, lambda path: os.open(path, flags, 0o600))
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            if mode is None:
                if os.path.exists(target):
                    mode = os.stat(target).st_mode & 0o7777
                else:
                    umask = os.umask(0)
                    os.umask(umask)
                    mode = 0o666 & ~umask
            os.chmod(temporary, mode)
        self.staged.append((target, temporary))

    def commit(self) -> None:
        """Rename every temporary file over its target; all but the last keep a backup to undo."""
        for i, (target, temporary) in enumerate(self.staged):
            existed = os.path.lexists(target)
            backup = None
            if existed and i < len(self.staged) - 1:
                with contextlib.suppress(OSError):  # no hard links here: this one cannot be undone
                    backup, _ = self._fresh(target, lambda path: os.link(target, path, follow_symlinks=False))
            self.renamed.append((target, existed, backup))
            with _naming(target):
                os.replace(temporary, target)
        self.committed = True

    def __exit__(self, kind, exc, tb) -> None:
        try:
            if not self.committed:
                for target, existed, backup in reversed(self.renamed):
                    if backup is not None:
                        _attempt(os.replace, backup, target)
                    elif not existed:
                        _attempt(os.unlink, target)
            for path in self.leftovers:
                _attempt(os.unlink, path)
        finally:
            if self.handles_sigterm:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)

    def _fresh(self, target: str, make):
        """``(path, make(path))`` for an unused ``<dir>/<prefix><name>.<pid>.<n>.tmp``, removed on leaving."""
        directory, name = os.path.split(target)
        while True:
            path = os.path.join(directory, f"{self.prefix}{name}.{os.getpid()}.{next(_names)}.tmp")
            try:
                made = make(path)
            except FileExistsError:
                continue
            self.leftovers.append(path)
            return path, made


@contextlib.contextmanager
def _naming(target):
    """Let an OSError name ``target`` rather than the temporary file it came from."""
    try:
        yield
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror or str(exc), target) from exc


def _exit_on_sigterm(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one must not cut the clean-up short
    raise SystemExit(128 + signum)


def _attempt(operation, *paths) -> None:
    """``operation(*paths)``, as far as it goes: undoing must not stop at the first failure."""
    with contextlib.suppress(OSError):
        operation(*paths)
