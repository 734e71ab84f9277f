"""The compile cache: key, private directory, sealed entries, info and clear."""

import hashlib
import os
import re
import stat
import subprocess
import sys

import platformdirs
import pytest

from castpile import cache, options

KEY = "ab" * 32
BODY = b"import triton\n\n\ndef f():\n    return 1\n"


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_cache_dir_precedence(monkeypatch, tmp_path):
    monkeypatch.delenv(cache.ENV_VAR, raising=False)
    assert str(cache.cache_dir()) == os.path.abspath(platformdirs.user_cache_dir("castpile"))
    monkeypatch.setenv(cache.ENV_VAR, str(tmp_path / "env"))
    assert str(cache.cache_dir()) == str(tmp_path / "env")
    assert str(cache.cache_dir(tmp_path / "arg")) == str(tmp_path / "arg")


def test_dir_is_created_private(tmp_path):
    d = cache.prepare_dir(tmp_path / "a" / "cache")
    assert d.is_dir() and mode(d) == 0o700


@pytest.mark.parametrize("bits", [0o770, 0o707, 0o777])
def test_dir_writable_by_others_is_refused(tmp_path, bits):
    d = tmp_path / "cache"
    d.mkdir()
    os.chmod(d, bits)
    with pytest.raises(cache.UnsafeCacheError, match="writable by group or others"):
        cache.prepare_dir(d)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a directory away")
def test_dir_owned_by_another_user_is_refused(tmp_path):
    d = tmp_path / "cache"
    d.mkdir(mode=0o700)
    os.chown(d, 4242, 4242)
    with pytest.raises(cache.UnsafeCacheError, match="owned by uid 4242"):
        cache.prepare_dir(d)


def test_store_then_load_keeps_every_line(tmp_path):
    d = cache.prepare_dir(tmp_path / "c")
    p = cache.entry_path(d, "pkg.kern", KEY)
    data = cache.store(p, KEY, BODY)
    assert mode(p) == 0o600
    assert p.read_bytes() == data == cache.load(p, KEY)
    assert data.splitlines()[: len(BODY.splitlines())] == BODY.splitlines()
    assert data.splitlines()[-1].startswith(b"# castpile-cache ")
    assert [f.name for f in d.iterdir()] == [p.name]


def test_body_without_final_newline(tmp_path):
    p = cache.entry_path(cache.prepare_dir(tmp_path / "c"), "m", KEY)
    data = cache.store(p, KEY, b"x = 1")
    assert data.startswith(b"x = 1\n# castpile-cache ") and cache.load(p, KEY) == data
    compile(data, str(p), "exec")


def corruptions():
    def truncate(data):
        return data[: len(data) // 2]

    def garbage(data):
        return os.urandom(len(data))

    def tampered_body(data):
        return data.replace(b"return 1", b"return 2")

    def flipped_byte(data):
        at = data.index(b"return 1") + len(b"return ")
        return data[:at] + bytes([data[at] ^ 1]) + data[at + 1 :]  # "return 0": still valid Python

    def no_trailer(data):
        return data[: data.rindex(b"# castpile-cache")]

    def empty(data):
        return b""

    return [truncate, garbage, tampered_body, flipped_byte, no_trailer, empty]


@pytest.mark.parametrize("corrupt", corruptions(), ids=lambda f: f.__name__)
def test_corrupt_entry_is_not_loaded(tmp_path, corrupt):
    p = cache.entry_path(cache.prepare_dir(tmp_path / "c"), "m", KEY)
    p.write_bytes(corrupt(cache.store(p, KEY, BODY)))
    assert cache.load(p, KEY) is None


def test_entry_under_another_key_is_not_loaded(tmp_path):
    p = cache.entry_path(cache.prepare_dir(tmp_path / "c"), "m", KEY)
    cache.store(p, KEY, BODY)
    assert cache.load(p, "cd" * 32) is None


@pytest.mark.parametrize("bits", [0o620, 0o602, 0o666])
def test_entry_writable_by_others_is_not_loaded(tmp_path, bits):
    p = cache.entry_path(cache.prepare_dir(tmp_path / "c"), "m", KEY)
    cache.store(p, KEY, BODY)
    os.chmod(p, bits)
    assert cache.load(p, KEY) is None


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a file away")
def test_entry_owned_by_another_user_is_not_loaded(tmp_path):
    p = cache.entry_path(cache.prepare_dir(tmp_path / "c"), "m", KEY)
    cache.store(p, KEY, BODY)
    os.chown(p, 4242, 4242)
    assert cache.load(p, KEY) is None


def test_symlinked_entry_is_not_loaded(tmp_path):
    d = cache.prepare_dir(tmp_path / "c")
    real = cache.entry_path(d, "real", KEY)
    cache.store(real, KEY, BODY)
    link = cache.entry_path(d, "m", KEY)
    link.symlink_to(real)
    assert cache.load(link, KEY) is None


def test_directory_at_entry_path_is_a_miss_and_a_clear_error_on_store(tmp_path):
    p = cache.entry_path(cache.prepare_dir(tmp_path / "c"), "m", KEY)
    p.mkdir()
    (p / "kept").write_text("not castpile's")
    assert cache.load(p, KEY) is None
    with pytest.raises(cache.BlockedEntryError, match=rf"{re.escape(str(p))} is a directory.*remove it"):
        cache.store(p, KEY, BODY)
    assert (p / "kept").read_text() == "not castpile's"
    assert sorted(f.name for f in p.parent.iterdir()) == [p.name]  # no temporary file left


@pytest.mark.parametrize(
    "module", ["pkg." + "m" * 250, "пакет." + "ядро" * 60, "pkg." + "名" * 90], ids=["ascii", "cyrillic", "cjk"]
)
def test_long_module_name_gives_a_bounded_readable_entry_name(tmp_path, module):
    d = cache.prepare_dir(tmp_path / "c")
    p = cache.entry_path(d, module, KEY)
    assert len(p.name.encode()) <= 200  # room left for the temporary file's affixes within 255
    assert module.startswith(p.name[: -len(f"-{KEY}.py")][:20])
    assert cache.store(p, KEY, BODY) == cache.load(p, KEY) is not None
    assert cache.info(d)["entries"] == 1


@pytest.mark.parametrize("module", ["пакет.ядро", "pkg.noyau_é", "包.核"], ids=["cyrillic", "latin", "cjk"])
def test_non_ascii_module_entry_is_listed_and_cleared(tmp_path, module):
    d = cache.prepare_dir(tmp_path / "c")
    cache.store(cache.entry_path(d, module, KEY), KEY, BODY)
    assert cache.info(d)["entries"] == 1
    assert cache.clear(d) == 1
    assert list(d.iterdir()) == []


def test_failed_write_leaves_no_temp_file(tmp_path, monkeypatch):
    d = cache.prepare_dir(tmp_path / "c")

    def fail(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(cache.os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        cache.store(cache.entry_path(d, "m", KEY), KEY, BODY)
    assert list(d.iterdir()) == []


def test_key_covers_source_path_options_and_version(monkeypatch):
    base = cache.entry_key(BODY, "/a/kern.py", {"strategy": "loop"})
    assert base == cache.entry_key(BODY, "/a/kern.py", {"strategy": "loop"})
    others = {
        cache.entry_key(BODY + b"#\n", "/a/kern.py", {"strategy": "loop"}),
        cache.entry_key(BODY, "/b/kern.py", {"strategy": "loop"}),
        cache.entry_key(BODY, "/a/kern.py", {"strategy": "gather"}),
    }
    monkeypatch.setattr(options, "VERSION", "999.0")
    monkeypatch.setattr(cache, "_fingerprint", None)
    others.add(cache.entry_key(BODY, "/a/kern.py", {"strategy": "loop"}))
    assert base not in others and len(others) == 4
    assert re.fullmatch(r"[0-9a-f]{64}", base), base  # a sha256 hex digest, usable in a file name


KILLED_WHILE_STORING = """
import os, sys
from castpile import cache
os.replace = lambda src, dst: os._exit(0)
cache.store(cache.entry_path(cache.cache_dir(sys.argv[1]), "m2", {key!r}), {key!r}, b"z = 3\\n")
"""

NOT_CASTPILES = [
    ".tmp-notes",
    ".tmp-m0.py.1.2.tmp",
    ".castpile-tmp-notes",
    "notes.txt",
    "m0-" + KEY[:16] + ".py",
    "my notes-" + KEY + ".py",
]


def fill(d):
    """Two entries (returned), the temporary file of a store killed before its rename, and files castpile did not make."""
    made = []
    for i, body in enumerate([BODY, b"y = 2\n"]):
        key = hashlib.sha256(bytes([i])).hexdigest()
        made.append(cache.entry_path(d, f"m{i}", key))
        cache.store(made[-1], key, body)
    killed = subprocess.run([sys.executable, "-c", KILLED_WHILE_STORING.format(key=KEY), str(d)], timeout=60)
    assert killed.returncode == 0
    for name in NOT_CASTPILES:
        (d / name).write_text("not castpile's")
    return made


def test_info_and_clear(tmp_path):
    d = cache.prepare_dir(tmp_path / "c")
    made = fill(d)
    [leftover] = set(os.listdir(d)) - set(NOT_CASTPILES) - {p.name for p in made}
    assert leftover.startswith(".castpile-tmp-m2-")
    sizes = sum(p.stat().st_size for p in made)
    assert cache.info(d) == {"dir": str(d), "entries": 2, "bytes": sizes}
    assert cache.clear(d) == 2
    assert sorted(p.name for p in d.iterdir()) == sorted(NOT_CASTPILES)
    assert cache.info(d)["entries"] == 0
    assert cache.info(tmp_path / "missing") == {"dir": str(tmp_path / "missing"), "entries": 0, "bytes": 0}


def test_cache_main(tmp_path, monkeypatch, capsys):
    d = cache.prepare_dir(tmp_path / "c")
    fill(d)
    monkeypatch.setenv(cache.ENV_VAR, str(d))
    assert cache.cache_main(["info"]) == 0
    out = capsys.readouterr().out
    assert f"dir: {d}\n" in out and "entries: 2\n" in out and "bytes: " in out
    assert cache.cache_main(["clear"]) == 0
    assert capsys.readouterr().out == f"removed 2 entries from {d}\n"
    assert cache.cache_main(["info", "--dir", str(tmp_path / "other")]) == 0
    assert f"dir: {tmp_path / 'other'}\n" in capsys.readouterr().out
    assert cache.cache_main(["bogus"]) == 2
    assert "usage: castpile cache" in capsys.readouterr().err
