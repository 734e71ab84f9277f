"""The compile cache: transpiled modules stored as real ``.py`` files.

An entry is ``<module>-<key>.py``: the transpiled text, byte for byte, followed by
one trailer line ``# castpile-cache <key> <sha256 of the text>``.  The trailer sits
after the last line, so every line keeps its number.  ``key`` hashes everything that
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
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import stat
import sys
from pathlib import Path

from .files import write_atomically

ENV_VAR = "CASTPILE_CACHE_DIR"
MAX_NAME_BYTES = 100
"""Longest module name, in UTF-8 bytes, kept whole in an entry's file name."""
_TRAILER = b"# castpile-cache "
_ENTRY_RE = re.compile(r"(?P<module>.+)-[0-9a-f]{64}\.py")
_TMP_PREFIX = ".castpile-tmp-"
# castpile.files.write_atomically names its temporary file <prefix><target name>.<pid>.<n>.tmp
_TMP_RE = re.compile(re.escape(_TMP_PREFIX) + r"(?P<entry>.+)\.[0-9]+\.[0-9]+\.tmp")
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
_fingerprint: bytes | None = None


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
    st = os.stat(directory)
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeCacheError(f"castpile cache {directory} is not a directory")
    why = _unsafe(st)
    if why:
        raise UnsafeCacheError(
            f"castpile cache directory {directory} is {why}; refusing to use it "
            f"(fix with `chmod 700 {directory}` as its owner, or set {ENV_VAR})"
        )
    return directory


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


def entry_key(source: bytes, path: str, options: dict[str, str]) -> str:
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


def _trailer(key: str, body: bytes) -> bytes:
    return _TRAILER + f"{key} {hashlib.sha256(body).hexdigest()}\n".encode()


def _seal(key: str, body: bytes) -> bytes:
    if not body.endswith(b"\n"):
        body += b"\n"
    return body + _trailer(key, body)


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
    body, trailer = data[:cut], data[cut:]
    if not trailer.startswith(_TRAILER) or trailer != _trailer(key, body):
        return None
    return data


def store(path: Path, key: str, body: bytes) -> bytes:
    """Write ``body`` sealed with its trailer to ``path`` atomically; return the bytes written.

    Whatever is at ``path`` is replaced, except a directory: :class:`BlockedEntryError`.
    """
    data = _seal(key, body)
    try:
        write_atomically(path, data, mode=0o600, prefix=_TMP_PREFIX)
    except IsADirectoryError:
        raise BlockedEntryError(
            f"castpile cache entry {path} is a directory, which castpile did not make "
            f"and will not delete; remove it, or set {ENV_VAR} to another directory"
        ) from None
    return data


def _files(directory: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(directory) as it:
            return [
                e
                for e in it
                if e.is_file(follow_symlinks=False) and (_is_entry_name(e.name) or _is_temp_name(e.name))
            ]
    except FileNotFoundError:
        return []


def info(directory: Path) -> dict:
    """``dir``, number of ``entries`` and their total ``bytes``."""
    entries = [e for e in _files(directory) if _is_entry_name(e.name)]
    return {
        "dir": str(directory),
        "entries": len(entries),
        "bytes": sum(e.stat(follow_symlinks=False).st_size for e in entries),
    }


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


def cache_main(argv: list[str]) -> int:
    """``castpile cache info|clear [--dir DIR]``: print and return an exit code."""
    parser = argparse.ArgumentParser(prog="castpile cache", description="Inspect or empty the castpile compile cache.")
    parser.add_argument("action", choices=("info", "clear"))
    parser.add_argument("--dir", help=f"cache directory (default: ${ENV_VAR}, else the user cache dir)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    directory = cache_dir(args.dir)
    if args.action == "info":
        for k, v in info(directory).items():
            print(f"{k}: {v}")
    else:
        n = clear(directory)
        print(f"removed {n} entr{'y' if n == 1 else 'ies'} from {directory}")
    return 0


if __name__ == "__main__":
    sys.exit(cache_main(sys.argv[1:]))
