"""The compile cache: transpiled modules stored as real ``.py`` files.

An entry is ``<module>-<key>.py``: the transpiled text, byte for byte, followed by
one trailer line ``# castpile-cache <key> <sha256 of the text>``.  The trailer sits
after the last line, so every line keeps its number.  ``key`` hashes everything that
changes the output (see :func:`entry_key`).

Rules: the directory is created 0700 and must be owned by the current user and not
writable by group or others, else :class:`UnsafeCacheError`; entries are written 0600
to a temporary file and renamed into place; an entry that is not a regular file owned
by the current user, is writable by group or others, or whose trailer does not match
its key and text is never returned by :func:`load` (the caller rebuilds it).
Nothing here imports libcst.
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
_TRAILER = b"# castpile-cache "
_ENTRY_RE = re.compile(r"^[A-Za-z0-9_.]+-[0-9a-f]{64}\.py$")
_TMP_PREFIX = ".tmp-"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_fingerprint: bytes | None = None


class UnsafeCacheError(PermissionError):
    """The cache directory could be written by someone else; it is not used."""


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
    """Version of castpile and its dependencies, and the size and mtime of castpile's sources."""
    global _fingerprint
    if _fingerprint is None:
        from importlib import metadata

        from . import __version__

        parts = [f"castpile={__version__}"]
        for dist in ("libcst", "sympy"):
            try:
                parts.append(f"{dist}={metadata.version(dist)}")
            except metadata.PackageNotFoundError:
                parts.append(f"{dist}=none")
        here = Path(__file__).parent
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
    """Where the entry for ``module`` with ``key`` lives."""
    return directory / f"{module}-{key}.py"


def _trailer(key: str, body: bytes) -> bytes:
    return _TRAILER + f"{key} {hashlib.sha256(body).hexdigest()}\n".encode()


def _seal(key: str, body: bytes) -> bytes:
    if not body.endswith(b"\n"):
        body += b"\n"
    return body + _trailer(key, body)


def load(path: Path, key: str) -> bytes | None:
    """The entry's full bytes if it is trustworthy and intact, else None."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or _unsafe(st):
            return None
        data = f.read()
    cut = data.rfind(b"\n", 0, len(data) - 1) + 1
    body, trailer = data[:cut], data[cut:]
    if not trailer.startswith(_TRAILER) or trailer != _trailer(key, body):
        return None
    return data


def store(path: Path, key: str, body: bytes) -> bytes:
    """Write ``body`` sealed with its trailer to ``path`` atomically; return the bytes written."""
    data = _seal(key, body)
    write_atomically(path, data, mode=0o600, prefix=_TMP_PREFIX)
    return data


def _files(directory: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(directory) as it:
            return [
                e
                for e in it
                if e.is_file(follow_symlinks=False)
                and (_ENTRY_RE.match(e.name) or e.name.startswith(_TMP_PREFIX))
            ]
    except FileNotFoundError:
        return []


def info(directory: Path) -> dict:
    """``dir``, number of ``entries`` and their total ``bytes``."""
    entries = [e for e in _files(directory) if _ENTRY_RE.match(e.name)]
    return {
        "dir": str(directory),
        "entries": len(entries),
        "bytes": sum(e.stat(follow_symlinks=False).st_size for e in entries),
    }


def clear(directory: Path) -> int:
    """Remove every entry and leftover temporary file; return how many entries went."""
    removed = 0
    for e in _files(directory):
        try:
            os.unlink(e.path)
        except FileNotFoundError:
            continue
        removed += bool(_ENTRY_RE.match(e.name))
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
