"""The import hook's compile cache under damage and hostile conditions: corrupt, forged or insecure entries, a FIFO
at the entry path, long and non-ASCII module names, a BOM, unwritable or full caches, a file size limit.

A kernel module imported from a cache that cannot serve it still imports (from memory, with one warning);
every kernel result is compared with a torch reference.
"""

import builtins
import codecs
import errno
import hashlib
import os
import re
import stat
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch

import castpile
from castpile import cache, files
from castpile.hook import CacheWarning
from testkit.hook import (  # noqa: F401 (the fixtures cache_dir and pkg)
    KERNEL,
    REPO,
    assert_triton_reads_transpiled_text,
    entries,
    hook_cache_dir,
    hook_package,
    run_python,
)

CORRUPTIONS = {
    "truncated": lambda data: data[: len(data) // 2],
    "garbage": lambda data: os.urandom(len(data)),
    "empty": lambda data: b"",
    # one bit of one byte, still valid Python: "raised" becomes "saised"
    "flipped byte": lambda data: data.replace(b"raised from", b"saised from"),
    # valid Python that would run if the entry were trusted without its seal
    "tampered": lambda data: b"import builtins\nbuiltins.CASTPILE_TAMPERED = True\n" + data,
}


@pytest.mark.parametrize("how", CORRUPTIONS)
def test_damaged_entry_is_rebuilt_not_executed(pkg, cache_dir, how):
    castpile.install_import_hook(pkg.name, cache_dir=cache_dir)
    pkg.check()
    [entry] = entries(cache_dir)
    good = entry.read_bytes()
    entry.write_bytes(CORRUPTIONS[how](good))
    pkg.check(W=2)
    assert "CASTPILE_TAMPERED" not in vars(builtins)
    assert entries(cache_dir) == [entry] and entry.read_bytes() == good


FIFO_AT_ENTRY = """
import os, sys
sys.path.insert(0, {root!r})
import castpile
from castpile import cache
source = {source!r}
key = cache.entry_key(open(source, "rb").read(), source, {{"strategy": "loop"}})
entry = cache.entry_path(cache.prepare_dir(cache.cache_dir({cache!r})), {module!r}, key)
os.mkfifo(entry)
castpile.install_import_hook({pkg!r}, cache_dir={cache!r})
from {pkg} import check
print(check.check(), entry.is_fifo(), cache.load(entry, key) is not None)
"""


def test_fifo_at_entry_path_is_replaced_without_hanging(pkg, cache_dir):
    code = FIFO_AT_ENTRY.format(
        root=str(pkg.root), source=str(pkg.path("kern")), cache=str(cache_dir), module=f"{pkg.name}.kern", pkg=pkg.name
    )
    res = run_python(code, timeout=30)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["4", "False", "True"]


@pytest.mark.parametrize("module", ["k" * 200, "ядро", "я" * 110], ids=["long", "non-ascii", "long-non-ascii"])
def test_long_and_non_ascii_module_names(pkg, cache_dir, module):
    pkg.write(module, KERNEL.format(scale=""))
    castpile.install_import_hook(pkg.name, cache_dir=cache_dir)
    kern = pkg.load(module)
    tensors = [torch.randn(5) for _ in range(4)]
    torch.testing.assert_close(kern.multicast_sum(tensors), torch.stack(tensors).sum(0))
    assert cache.info(cache_dir)["entries"] == 1
    assert cache.clear(cache_dir) == 1 and list(cache_dir.iterdir()) == []


PAIR_SUM = """\
import triton
import triton.language as tl
from castpile import multicast_like


@triton.jit
def pair_sum(out, dev_ptrs, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    bufs = multicast_like(out, dev_ptrs[:2])
    x = bufs[offs]
    tl.store(out + offs, tl.sum(x, axis=0))
"""


def test_module_starting_with_utf8_bom(pkg, cache_dir):
    pkg.path("pair").write_bytes(codecs.BOM_UTF8 + PAIR_SUM.encode())
    castpile.install_import_hook(pkg.name, cache_dir=cache_dir)
    pair = pkg.load("pair")
    tensors = [torch.randn(8) for _ in range(2)]
    out = torch.empty(8)
    pair.pair_sum[(1,)](out, torch.tensor([t.data_ptr() for t in tensors], dtype=torch.int64), BLOCK=8)
    torch.testing.assert_close(out, tensors[0] + tensors[1])
    assert len(entries(cache_dir)) == 1


def forge(entry: Path, good: bytes) -> bytes:
    """A well-sealed entry that sets a flag when executed."""
    key = entry.stem.rsplit("-", 1)[1]
    body = b"import builtins\nbuiltins.CASTPILE_FORGED = True\n" + good[: good.rindex(b"# castpile-cache ")]
    return body + f"# castpile-cache {key} {hashlib.sha256(body).hexdigest()}\n".encode()


def test_entry_resealed_by_its_owner_runs(pkg, cache_dir):
    """The documented limit of the seal: it catches accidents, not the cache's owner."""
    castpile.install_import_hook(pkg.name, cache_dir=cache_dir)
    pkg.check()
    [entry] = entries(cache_dir)
    entry.write_bytes(forge(entry, entry.read_bytes()))
    assert "CASTPILE_FORGED" not in vars(builtins)
    pkg.check(W=2)
    assert vars(builtins).pop("CASTPILE_FORGED", None) is True


@pytest.mark.parametrize("insecure", ["group-writable", "other-writable", "foreign-owner"])
def test_insecure_entry_is_never_loaded(pkg, cache_dir, insecure):
    if insecure == "foreign-owner" and os.geteuid() != 0:
        pytest.skip("needs root to give a file away")
    castpile.install_import_hook(pkg.name, cache_dir=cache_dir)
    pkg.check()
    [entry] = entries(cache_dir)
    good = entry.read_bytes()
    entry.write_bytes(forge(entry, good))
    assert cache.load(entry, entry.stem.rsplit("-", 1)[1]) is not None  # the forgery is well sealed
    if insecure == "group-writable":
        os.chmod(entry, 0o660)
    elif insecure == "other-writable":
        os.chmod(entry, 0o602)
    else:
        os.chown(entry, 4242, 4242)
    pkg.check(W=2)
    assert "CASTPILE_FORGED" not in vars(builtins)
    assert entry.read_bytes() == good
    st = entry.stat()
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.geteuid()


class OsWith:
    """The ``os`` module for :mod:`castpile.files` alone, with some of its functions replaced."""

    def __init__(self, **replaced):
        self.__dict__.update(replaced)

    def __getattr__(self, name):
        return getattr(os, name)


def failing(errno_, why):
    def fail(*args, **kwargs):
        raise OSError(errno_, why)

    return fail


def under_a_file(pkg, cache_dir, monkeypatch):
    cache_dir.parent.mkdir(parents=True, exist_ok=True)
    (cache_dir.parent / "a-file").write_text("")
    return cache_dir.parent / "a-file" / "cache", "Not a directory"


def writable_by_others(pkg, cache_dir, monkeypatch):
    cache_dir.mkdir(mode=0o777)
    os.chmod(cache_dir, 0o777)
    return cache_dir, "writable by group or others"


def directory_at_entry(pkg, cache_dir, monkeypatch):
    source = pkg.path("kern")
    key = cache.entry_key(source.read_bytes(), str(source), {"strategy": "loop"})
    cache.entry_path(cache.prepare_dir(cache_dir), f"{pkg.name}.kern", key).mkdir()
    return cache_dir, "is a directory, which castpile did not make"


def read_only(pkg, cache_dir, monkeypatch):
    monkeypatch.setattr(files, "os", OsWith(open=failing(errno.EROFS, "Read-only file system")))
    return cache_dir, "Read-only file system"


def full(pkg, cache_dir, monkeypatch):
    def no_space(fd, *args, **kwargs):  # the temporary file exists; its first write fails
        os.close(fd)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files, "os", OsWith(fdopen=no_space))
    return cache_dir, "No space left on device"


def cleared_before_rename(pkg, cache_dir, monkeypatch):
    def clear_then_replace(src, dst):  # `castpile cache clear` runs between the write and the rename
        cache.clear(cache_dir)
        os.replace(src, dst)

    monkeypatch.setattr(files, "os", OsWith(replace=clear_then_replace))
    return cache_dir, "No such file or directory"


CACHE_FAILURES = [under_a_file, writable_by_others, directory_at_entry, read_only, full, cleared_before_rename]


@pytest.mark.parametrize("failure", CACHE_FAILURES, ids=lambda f: f.__name__)
def test_cache_failure_imports_from_memory_and_warns(pkg, cache_dir, monkeypatch, failure):
    directory, why = failure(pkg, cache_dir, monkeypatch)
    before = sorted(directory.iterdir()) if directory.is_dir() else []
    castpile.install_import_hook(pkg.name, cache_dir=directory)
    with pytest.warns(CacheWarning, match=rf"{re.escape(str(directory))}.*{why}.*in memory"):
        assert pkg.check() == 4
    kern = sys.modules[f"{pkg.name}.kern"]
    assert kern.__file__ == str(pkg.path("kern"))
    assert_triton_reads_transpiled_text(kern)
    assert not os.path.exists(kern.sum_kernel.fn.__code__.co_filename)
    if directory.is_dir():  # nothing was added, temporary files included
        assert sorted(directory.iterdir()) in (before, [])


def test_cache_failure_warns_once(pkg, cache_dir, monkeypatch):
    read_only(pkg, cache_dir, monkeypatch)
    pkg.write("kern2", KERNEL.format(scale="2.0 * "))
    castpile.install_import_hook(pkg.name, cache_dir=cache_dir)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kern2 = pkg.load("kern2")
        assert pkg.check() == 4
    assert [w.category for w in caught] == [CacheWarning]
    tensors = [torch.randn(6) for _ in range(3)]
    torch.testing.assert_close(kern2.multicast_sum(tensors), 2.0 * torch.stack(tensors).sum(0))


def test_cold_import_under_a_file_size_limit(pkg, cache_dir):
    """`ulimit -f 1`: writing the entry fails with EFBIG (Python ignores SIGXFSZ); the import does not."""
    import resource

    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(pkg.root)!r})
        import castpile
        castpile.install_import_hook({pkg.name!r}, cache_dir={str(cache_dir)!r})
        from {pkg.name} import check
        print(check.check())
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO), "TRITON_INTERPRET": "1"}
    res = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024)),
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["4"]
    assert res.stderr.count("CacheWarning") == 1 and "File too large" in res.stderr
    assert list(cache_dir.iterdir()) == []
