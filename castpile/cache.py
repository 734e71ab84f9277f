"""The compile cache: transpiled modules stored as real ``.py`` files.

An entry is ``<module>-<key>.py``: the transpiled text, byte for byte, followed by
one trailer line ``# castpile-cache <key> <sha256 of the text> <source path as JSON>``
(the path is what ``castpile cache info`` lists; the key covers it already).  The
trailer sits after the last line, so every line keeps its number.  ``key`` hashes everything that
changes the output (see :func:`entry_key`); a module name longer than
``MAX_NAME_BYTES`` keeps only a readable prefix in the file name (see :func:`entry_path`).

What guards the entries:

- Against other users, by ownership and permissions: the directory is created 0700
  and must be owned by the current user and not writable by group or others, else
  :class:`UnsafeCacheError`; an entry that is not owned by the current user or is
  writable by group or others is never returned by :func:`load`.
- Against accidents, by the seal (the trailer): an entry that was truncated, partly
  written, bit-rotted or built under another key does not match its trailer and is
  never returned by :func:`load`.  The seal is an unkeyed hash: it does not stop the
  owner, or a program running as the owner, from rewriting an entry and its trailer,
  and is not meant to; they can run any code anyway.
- Against hanging or failing on whatever sits at an entry's path: anything but a
  regular file (a FIFO, a device, a symlink, a directory) is never opened for reading;
  :func:`load` treats it as a miss.  :func:`store` renames the rebuilt entry over it,
  except over a directory, which it refuses with :class:`BlockedEntryError`.

Entries are written 0600 to a temporary file ``.castpile-tmp-<entry>.<pid>.<n>.tmp``
and renamed into place.  :func:`info` and :func:`clear` see only entries and such
temporary files, never another file in the directory.  Nothing here imports libcst.

The cache is bounded: once a new entry is stored, the least recently used entries go
until the entries hold at most ``$CASTPILE_CACHE_MAX_MB`` MiB (:data:`DEFAULT_MAX_MB`
unless set; 0: no bound), the new one always kept (:func:`prune`).  Loading an entry
marks it used (its mtime).  A notebook cell's key names the cell without the kernel's
process id (:func:`stable_path`), so a restarted kernel finds the entries of the last one.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import json
import linecache
import os
import re
import stat
import sys
import time
import types
import warnings
from pathlib import Path
from typing import Any

from .files import write_atomically

ENV_VAR = "CASTPILE_CACHE_DIR"
MAX_MB_VAR = "CASTPILE_CACHE_MAX_MB"
DEFAULT_MAX_MB = 256
"""The bound on the entries' total size, in MiB, when :data:`MAX_MB_VAR` is not set."""
MAX_NAME_BYTES = 100
"""Longest module name, in UTF-8 bytes, kept whole in an entry's file name."""
_TRAILER = b"# castpile-cache "
_ENTRY_RE = re.compile(r"(?P<module>.+)-[0-9a-f]{64}\.py")
_IN_MEMORY_RE = re.compile(r"(?P<source>.+) \((?:[\w.]+, )?transpiled in memory\)", re.S)
_TMP_PREFIX = ".castpile-tmp-"
# castpile.files.write_atomically names its temporary file <prefix><target name>.<pid>.<n>.tmp
_TMP_RE = re.compile(re.escape(_TMP_PREFIX) + r"(?P<entry>.+)\.[0-9]+\.[0-9]+\.tmp")
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
# ipykernel names a cell <tmp>/ipykernel_<pid>/<hash of its text>.py, IPython <ipython-input-<n>-<hash of its text>>
_CELL_NAMES = (
    re.compile(r".*[/\\]ipykernel_[0-9]+[/\\](?P<cell>[0-9]+\.py)", re.S),
    re.compile(r"<ipython-input-[0-9]+-(?P<cell>[0-9a-f]+)>", re.S),
)
_fingerprint: bytes | None = None
_failed = False  # transpiled_file has warned that the cache failed
_warned_bound = False  # prune has warned about a bad $CASTPILE_CACHE_MAX_MB


class CacheWarning(UserWarning):
    """The compile cache could not be used: modules are transpiled in memory instead."""


class UnsafeCacheError(PermissionError):
    """The cache directory could be written by someone else; it is not used."""


class BlockedEntryError(IsADirectoryError):
    """A directory sits at an entry's path; castpile did not make it and leaves it alone."""


def cache_dir(explicit: str | os.PathLike | None = None) -> Path:
    """The cache directory: ``explicit``, else ``$CASTPILE_CACHE_DIR``, else the user cache dir."""
    if explicit is not None:
        return Path(explicit).expanduser().absolute()
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser().absolute()
    import platformdirs

    return Path(platformdirs.user_cache_dir("castpile")).absolute()


def _uid() -> int | None:
    return os.geteuid() if hasattr(os, "geteuid") else None


def _unsafe(st: os.stat_result) -> str | None:
    """Why a file or directory with this stat may not be trusted, or None."""
    uid = _uid()
    if uid is not None and st.st_uid != uid:
        return f"owned by uid {st.st_uid}, not {uid}"
    if uid is not None and st.st_mode & 0o022:
        return f"writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def prepare_dir(directory: Path) -> Path:
    """Create ``directory`` 0700 if needed and check that only its owner can write it."""
    try:
        directory.parent.mkdir(parents=True, exist_ok=True)
        directory.mkdir(mode=0o700)
        os.chmod(directory, 0o700)
    except FileExistsError:
        pass
    why = refusal(directory)
    if why:
        raise UnsafeCacheError(why)
    return directory


def refusal(directory: Path) -> str | None:
    """Why castpile refuses the existing ``directory`` as its cache (another owner, writable by group or
    others, not a directory), or None; ``FileNotFoundError`` when it does not exist."""
    st = os.stat(directory)
    if not stat.S_ISDIR(st.st_mode):
        return f"castpile cache {directory} is not a directory"
    why = _unsafe(st)
    if why:
        return (
            f"castpile cache directory {directory} is {why}; refusing to use it "
            f"(fix with `chmod 700 {directory}` as its owner, or set {ENV_VAR})"
        )
    return None


def _castpile_fingerprint() -> bytes:
    """Version of castpile and its dependencies, and the size and mtime of the compiler's sources
    (castpile/compiler: nothing else changes what a transpile writes)."""
    global _fingerprint
    if _fingerprint is None:
        from importlib import metadata

        from .options import VERSION

        parts = [f"castpile={VERSION}"]
        for dist in ("libcst", "sympy"):
            try:
                parts.append(f"{dist}={metadata.version(dist)}")
            except metadata.PackageNotFoundError:
                parts.append(f"{dist}=none")
        here = Path(__file__).parent / "compiler"
        for src in sorted(here.rglob("*.py")):
            st = src.stat()
            parts.append(f"{src.relative_to(here)}:{st.st_size}:{st.st_mtime_ns}")
        _fingerprint = "\n".join(parts).encode()
    return _fingerprint


def entry_key(source: bytes, path: str, options: dict[str, Any]) -> str:
    """Hex key of the output for ``source`` at ``path`` under ``options`` and this castpile."""
    h = hashlib.sha256(b"castpile-cache-v1\0")
    for part in (
        _castpile_fingerprint(),
        os.fsencode(path),
        repr(sorted(options.items())).encode(),
        source,
    ):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


def entry_path(directory: Path, module: str, key: str) -> Path:
    """Where the entry for ``module`` with ``key`` lives.

    A module name longer than ``MAX_NAME_BYTES`` keeps only its first characters that
    fit: the key alone identifies the text, the name is for people reading tracebacks.
    So the entry's name, and its temporary file's, stay within the 255-byte limit of
    file names.
    """
    readable = module.encode()[:MAX_NAME_BYTES].decode(errors="ignore")
    return directory / f"{readable}-{key}.py"


def _is_entry_name(name: str) -> bool:
    match = _ENTRY_RE.fullmatch(name)
    return match is not None and match["module"].replace(".", "_").isidentifier()


def _is_temp_name(name: str) -> bool:
    match = _TMP_RE.fullmatch(name)
    return match is not None and _is_entry_name(match["entry"])


def _seal(key: str, body: bytes, source: str | None) -> bytes:
    if not body.endswith(b"\n"):
        body += b"\n"
    named = "" if source is None else " " + json.dumps(source)
    return body + _TRAILER + f"{key} {hashlib.sha256(body).hexdigest()}{named}\n".encode()


def _sealed_fields(trailer: bytes) -> list[str] | None:
    """The trailer's key, hash and (where recorded) source path as JSON, or None for no trailer."""
    if not trailer.startswith(_TRAILER):
        return None
    return trailer[len(_TRAILER) :].rstrip(b"\n").decode("ascii", errors="replace").split(" ", 2)


def _trusted_file(st: os.stat_result) -> bool:
    return stat.S_ISREG(st.st_mode) and not _unsafe(st)


def load(path: Path, key: str) -> bytes | None:
    """The entry's full bytes if it is a trusted regular file and its seal matches, else None.

    Never blocks: anything but a regular file is refused before it is opened, and the
    open itself neither follows a symlink nor waits (for a FIFO swapped in meanwhile).
    """
    try:
        if not _trusted_file(os.lstat(path)):
            return None
        fd = os.open(path, _OPEN_FLAGS)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not _trusted_file(os.fstat(f.fileno())):
            return None
        data = f.read()
        cut = data.rfind(b"\n", 0, len(data) - 1) + 1
        body, fields = data[:cut], _sealed_fields(data[cut:])
        if fields is None or fields[:2] != [key, hashlib.sha256(body).hexdigest()] or not data.endswith(b"\n"):
            return None
        _mark_used(f.fileno())
    return data


def _mark_used(fd: int) -> None:
    """Give the open entry ``fd`` the time of now, which :func:`prune` keeps longest (none where it cannot)."""
    if os.utime in os.supports_fd:
        with contextlib.suppress(OSError):  # a read-only file system: the entry still loads
            os.utime(fd)


def store(path: Path, key: str, body: bytes, source: str | None = None) -> bytes:
    """Write ``body`` sealed with its trailer (naming ``source``, the user's file) to ``path`` atomically;
    return the bytes written.

    Whatever is at ``path`` is replaced, except a directory: :class:`BlockedEntryError`.
    """
    data = _seal(key, body, source)
    try:
        write_atomically(path, data, mode=0o600, prefix=_TMP_PREFIX)
    except IsADirectoryError:
        raise BlockedEntryError(
            f"castpile cache entry {path} is a directory, which castpile did not make "
            f"and will not delete; remove it, or set {ENV_VAR} to another directory"
        ) from None
    return data


def cached(
    directory: Path, module: str, source_path: str, source: bytes, options: dict[str, Any], build
) -> tuple[str, bytes]:
    """The entry for ``source`` (the file ``source_path``, imported as ``module``) under ``options``:
    its path and sealed bytes, ``build()`` (the transpiled bytes) stored first on a miss.  Any
    ``OSError`` (an unsafe or unwritable directory, a blocked entry) propagates: see :func:`warn_failure`."""
    directory = prepare_dir(directory)
    key = entry_key(source, stable_path(source_path), options)
    entry = entry_path(directory, module, key)
    data = load(entry, key)
    if data is not None:
        recorded = _recorded_in(data)
        if recorded is not None and recorded != source_path:  # the same notebook cell, in an earlier kernel
            body = _resited(data[: data.rfind(b"\n", 0, len(data) - 1) + 1], recorded, source_path)
            try:
                data = store(entry, key, body, source_path)
            except OSError:  # a cache that loads but cannot be written: this kernel's names, in memory
                data = _seal(key, body, source_path)
        return os.fspath(entry), data
    data = store(entry, key, build(), source_path)
    prune(directory, _bound(), keep=entry)
    return os.fspath(entry), data


def stable_path(source_path: str) -> str:
    """The path an entry's key covers: ``source_path``, but a notebook cell's name without what changes when its
    kernel restarts (ipykernel's ``<tmp>/ipykernel_<pid>/<hash>.py``, IPython's ``<ipython-input-<n>-<hash>>``:
    the hash is of the cell's text, which the key covers too)::

        >>> stable_path("/tmp/ipykernel_4242/3123.py"), stable_path("/src/k.py")
        ('<notebook cell 3123.py>', '/src/k.py')
    """
    for pattern in _CELL_NAMES:
        match = pattern.fullmatch(source_path)
        if match:
            return f"<notebook cell {match['cell']}>"
    return source_path


def _resited(body: bytes, recorded: str, current: str) -> bytes:
    """``body``, transpiled from the path ``recorded``, naming ``current`` instead: the only place a transpiled text
    names its path is the ``"path:line"`` literal of each site (a store's, a wait's)."""
    return body.replace(ascii(f"{recorded}:")[:-1].encode(), ascii(f"{current}:")[:-1].encode())


def max_bytes(environ=None) -> int | None:
    """The bound on the entries' total size: ``$CASTPILE_CACHE_MAX_MB`` MiB, else :data:`DEFAULT_MAX_MB`; None for
    ``0`` (no bound).  ``ValueError`` naming the variable for anything but a number of MiB, 0 or more."""
    text = (os.environ if environ is None else environ).get(MAX_MB_VAR, "").strip()
    if not text:
        return DEFAULT_MAX_MB * 2**20
    try:
        mib = float(text)
    except ValueError:
        mib = -1.0
    if not mib >= 0 or mib == float("inf"):
        raise ValueError(
            f"{MAX_MB_VAR}={text!r} is not a number of MiB: give the most the compile cache may hold, "
            f"as in {MAX_MB_VAR}={DEFAULT_MAX_MB}, or 0 for no bound"
        )
    return None if mib == 0 else int(mib * 2**20)


def describe_bound(limit: int | None) -> str:
    """What ``castpile cache info`` says of the bound ``limit`` (bytes; None: none)."""
    if limit is None:
        return f"none ({MAX_MB_VAR}=0: entries are never removed but by `castpile cache clear`)"
    mib = limit / 2**20
    shown = f"{mib:g} MiB" if mib >= 1 else f"{limit} bytes"
    return f"{shown} ({MAX_MB_VAR}, default {DEFAULT_MAX_MB}): beyond it the least recently used entries go"


def _bound() -> int | None:
    """:func:`max_bytes`, where a bad value warns (once, :class:`CacheWarning`) and keeps to the default."""
    global _warned_bound
    try:
        return max_bytes()
    except ValueError as exc:
        if not _warned_bound:
            _warned_bound = True
            warnings.warn(f"{exc}; keeping to {DEFAULT_MAX_MB} MiB", CacheWarning, stacklevel=_user_stacklevel())
        return DEFAULT_MAX_MB * 2**20


def prune(directory: Path, limit: int | None, keep: Path | None = None) -> int:
    """Remove the least recently used entries (the oldest mtime: written or loaded longest ago) until the rest hold
    at most ``limit`` bytes (None: no bound), never ``keep``; return how many went.  Entries another process
    removes meanwhile are skipped."""
    if limit is None:
        return 0
    try:
        listed = _files(directory)
    except OSError:  # pruning is housekeeping: the entry just stored is there all the same
        return 0
    sized = []
    for e in listed:
        if not _is_entry_name(e.name):
            continue
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue
        sized.append((st.st_mtime_ns, e.path, st.st_size))
    total = sum(size for _, _, size in sized)
    removed = 0
    for _, path, size in sorted(sized):
        if total <= limit:
            break
        if keep is not None and path == os.fspath(keep):
            continue
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError:
            continue
        else:
            removed += 1
        total -= size
    return removed


def warn_failure(directory: Path, module: str, failure: OSError) -> None:
    """Warn (:class:`CacheWarning`) that the cache failed and ``module`` was transpiled in memory, at the user's line
    that led here (an import, a decorator: the first frame that is neither castpile's nor importlib's)."""
    warnings.warn(
        f"castpile cannot use its compile cache {directory} ({failure}); {module} was "
        f"transpiled in memory, as every module the cache cannot hold will be, on every import "
        f"(pass install_import_hook a cache_dir, or set {ENV_VAR}, that you can write)",
        CacheWarning,
        stacklevel=_user_stacklevel(),
    )


def transpiled_file(
    module: str, source_path: str, source: bytes, options: dict[str, Any], build, *, in_memory: str
) -> tuple[str, str]:
    """The file name that code transpiled from ``source`` is to give, and the transpiled text, for the
    front ends that compile such code themselves (``@castpile.jit``, ``castpile run``).

    The name is the cache entry's; when the cache fails, ``in_memory`` (no file's name), with one
    :class:`CacheWarning` per process.  Either way the text goes into :mod:`linecache` under that name,
    where no check evicts it (no mtime): ``inspect``, Triton and tracebacks read it there, even once
    ``castpile cache clear`` has removed the entry.
    """
    global _failed
    try:
        filename, data = cached(cache_dir(), module, source_path, source, options, build)
    except OSError as failure:
        if not _failed:
            _failed = True
            warn_failure(cache_dir(), module, failure)
        filename, data = in_memory, build()
    text = importlib.util.decode_source(data)
    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
    return filename, text


def _user_stacklevel() -> int:
    """The ``stacklevel`` that makes the caller's ``warnings.warn`` name the first frame that is neither castpile's
    nor importlib's: the user's import, decorator or call.  ``warnings`` does not count importlib's frames (it
    skips them, as here), so they are not counted."""
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep

    def internal(frame: types.FrameType) -> bool:  # what warnings itself skips
        name = frame.f_code.co_filename
        return "importlib" in name and "_bootstrap" in name

    frame: types.FrameType | None = sys._getframe(1)  # the caller: level 1
    level = 1
    while frame is not None and (frame.f_code.co_filename.startswith(package) or internal(frame)):
        frame = frame.f_back
        if frame is not None and not internal(frame):
            level += 1
    return level


def in_memory_name(source_path: str, front_end: str = "") -> str:
    """The file name that code transpiled in memory from ``source_path`` gives (no file has it); ``front_end``
    keeps apart the texts that two front ends make of one file."""
    return f"{source_path} ({front_end + ', ' if front_end else ''}transpiled in memory)"


def source_of(filename: str) -> str | None:
    """The user's file that ``filename`` was transpiled from: a cache entry's, as its trailer records it, or
    the file of an :func:`in_memory_name`; None for any other file."""
    in_memory = _IN_MEMORY_RE.fullmatch(filename)
    if in_memory:
        return in_memory["source"]
    if not _is_entry_name(os.path.basename(filename)):
        return None
    return _recorded_source(filename)


def _files(directory: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(directory) as it:
            return [
                e for e in it if e.is_file(follow_symlinks=False) and (_is_entry_name(e.name) or _is_temp_name(e.name))
            ]
    except (FileNotFoundError, NotADirectoryError):  # no directory there, nor where it would be made
        return []


def info(directory: Path) -> dict:
    """``dir``, number of ``entries`` and their total ``bytes``."""
    entries = [e for e in _files(directory) if _is_entry_name(e.name)]
    return {
        "dir": str(directory),
        "entries": len(entries),
        "bytes": sum(e.stat(follow_symlinks=False).st_size for e in entries),
    }


def entries(directory: Path) -> list[dict]:
    """Every entry: its ``module``, the ``source`` file it was transpiled from (None where the entry does
    not record it), ``bytes`` and ``age_s`` (seconds since it was written or last loaded); by module, newest first."""
    now = time.time()
    listed = []
    for e in _files(directory):
        match = _ENTRY_RE.fullmatch(e.name)
        if match is None or not _is_entry_name(e.name):
            continue
        st = e.stat(follow_symlinks=False)
        listed.append(
            {
                "module": match["module"],
                "source": _recorded_source(e.path),
                "bytes": st.st_size,
                "age_s": max(now - st.st_mtime, 0.0),
            }
        )
    return sorted(listed, key=lambda entry: (entry["module"], entry["age_s"]))


def _recorded_in(data: bytes) -> str | None:
    """The source path the trailer of the entry ``data`` records, or None."""
    return _source_field(_sealed_fields(data.rstrip(b"\n").rpartition(b"\n")[2]))


def _source_field(fields: list[str] | None) -> str | None:
    try:
        return json.loads(fields[2]) if fields and len(fields) == 3 else None
    except ValueError:
        return None


def _recorded_source(path: str) -> str | None:
    """The source path an entry's trailer records, or None."""
    try:
        with os.fdopen(os.open(path, _OPEN_FLAGS), "rb") as f:  # never follows a link nor waits on a FIFO
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                return None
            f.seek(max(st.st_size - 8192, 0))
            fields = _sealed_fields(f.read().rstrip(b"\n").rpartition(b"\n")[2])
    except OSError:
        return None
    return _source_field(fields)


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit}"
    return f"{int(seconds)} s"


def clear(directory: Path) -> int:
    """Remove every entry and castpile's leftover temporary files, nothing else; return how many entries went."""
    removed = 0
    for e in _files(directory):
        try:
            os.unlink(e.path)
        except FileNotFoundError:
            continue
        removed += _is_entry_name(e.name)
    return removed


def unusable(directory: Path) -> str | None:
    """Why the hook could not write ``directory`` (where it is safe: :func:`refusal` says the rest), or None: a
    directory it cannot write, or none that it could create (a read-only home, a parent it cannot write or that is
    no directory)."""
    if os.path.isdir(directory):
        if not os.access(directory, os.W_OK | os.X_OK):
            mode = stat.S_IMODE(os.stat(directory).st_mode)
            return f"cannot write {directory} (mode {mode:o}, or a read-only file system)"
        return None
    parent = directory.parent
    while not os.path.lexists(parent) and parent != parent.parent:
        parent = parent.parent
    if not os.path.isdir(parent):
        return f"cannot create {directory}: {parent} is not a directory"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"cannot create {directory}: cannot write {parent} (its permissions, or a read-only file system)"
    return None


def cache_main(argv: list[str]) -> int:
    """``castpile cache info|clear [--dir DIR]``: print and return an exit code (2 for a DIR that is no directory, or
    that cannot be read or emptied, and for a bad ``$CASTPILE_CACHE_MAX_MB``)."""
    parser = argparse.ArgumentParser(
        prog="castpile cache",
        description="Inspect or empty the castpile compile cache.",
        epilog=f"The cache holds at most ${MAX_MB_VAR} MiB of entries (default {DEFAULT_MAX_MB}; 0: no bound): "
        "storing a new entry removes the least recently used beyond it.",
    )
    parser.add_argument("action", choices=("info", "clear"))
    parser.add_argument("--dir", help=f"cache directory (default: ${ENV_VAR}, else the user cache dir)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    directory = cache_dir(args.dir)
    try:
        if os.path.lexists(directory) and not os.path.isdir(directory):
            raise _CacheError(f"{directory}: is not a directory; give --dir (or set {ENV_VAR}) a directory")
        if args.action == "clear":
            n = clear(directory)
            print(f"removed {n} entr{'y' if n == 1 else 'ies'} from {directory}")
        else:
            _print_info(directory)
    except _CacheError as exc:
        print(f"castpile cache: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"castpile cache: error: {exc.filename or directory}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    return 0


class _CacheError(Exception):
    """A ``castpile cache`` error: the message, exit 2."""


def _print_info(directory: Path) -> None:
    try:
        bound = describe_bound(max_bytes())
    except ValueError as exc:
        raise _CacheError(str(exc)) from None
    listed = entries(directory)
    for k, v in info(directory).items():
        print(f"{k}: {v}")
    print(f"bound: {bound}")
    try:
        why = refusal(directory)
    except (FileNotFoundError, NotADirectoryError):
        why = None  # no directory yet: the hook creates it, 0700, or says why it cannot
    if why:
        print(f"refused: the import hook will not use it: {why}")
    else:
        why = unusable(directory)
        if why:
            print(
                f"unusable: the import hook cannot store entries here: {why}; it transpiles every module in "
                f"memory, on every import (set {ENV_VAR} to a directory you can write)"
            )
        elif not os.path.isdir(directory):
            print("not created yet: the import hook creates it, 0700, with its first entry")
    for entry in listed:
        source = entry["source"] or "(not recorded)"
        print(f"  {entry['module']}  {source}  {entry['bytes']} bytes  {_age(entry['age_s'])} old")


if __name__ == "__main__":
    sys.exit(cache_main(sys.argv[1:]))
