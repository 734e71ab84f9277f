"""Where the command line's output lands: special files written through, stdout write errors
reported, several outputs all or nothing, no temporary file left behind by SIGTERM."""

import os
import resource
import signal
import stat
import subprocess
import sys
import textwrap

import pytest

from castpile import __version__, cli, transpile
from castpile.files import write_atomically
from testkit.cli import KERNEL, PLAIN

CHILD_TIMEOUT_S = 60


def castpile(*args, cwd=None, stdout=subprocess.PIPE, preexec_fn=None):
    """``python -m castpile ARGS`` in a child (the plain copy's fast path included)."""
    return subprocess.run(
        [sys.executable, "-m", "castpile", *map(str, args)],
        stdout=stdout,
        stderr=subprocess.PIPE,
        cwd=cwd,
        preexec_fn=preexec_fn,
        timeout=CHILD_TIMEOUT_S,
    )


def in_process(*args):
    """``cli.main(ARGS)`` in this process, with only its exit status kept."""
    return subprocess.CompletedProcess(args, cli.main([str(a) for a in args]))


@pytest.fixture(params=["plain", "kernel"])
def source(request, tmp_path):
    """A SRC without castpile (copied by ``python -m castpile`` before the CLI loads) and one with it."""
    path = tmp_path / f"{request.param}.py"
    path.write_bytes(PLAIN if request.param == "plain" else KERNEL)
    return path


def expected(source):
    data = source.read_bytes()
    return data if data == PLAIN else transpile(data, str(source))


def names(directory):
    return sorted(p.name for p in directory.iterdir())


# -o naming a FIFO or a device: written through, never replaced.


def test_fifo_out_is_written_through(source, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    try:
        proc = castpile(source, "-o", fifo)
        received, _ = reader.communicate(timeout=10)
    finally:
        reader.kill()
        reader.wait()
    assert proc.returncode == 0, proc.stderr.decode()
    assert received == expected(source)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert names(tmp_path) == sorted(["fifo", source.name])


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")
@pytest.mark.parametrize("run", [castpile, in_process])
def test_device_out_is_written_through(run, source, tmp_path):
    null = tmp_path / "null"
    os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    assert run(source, "-o", null).returncode == 0
    st = os.stat(null)
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)
    assert names(tmp_path) == sorted(["null", source.name])


@pytest.fixture
def dev_null():
    """/dev/null, made again should a run have replaced it."""
    yield "/dev/null"
    st = os.stat("/dev/null")
    if not (stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)):
        os.unlink("/dev/null")
        os.mknod("/dev/null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
        os.chmod("/dev/null", 0o666)
        pytest.fail("castpile replaced /dev/null (now restored)")


@pytest.mark.parametrize("run", [castpile, in_process])
def test_dev_null_out_stays_the_device(run, source, dev_null):
    assert run(source, "-o", dev_null).returncode == 0
    st = os.stat(dev_null)
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)


# Writing to stdout: a write error is exit 2 with one clear line, never truncated output with exit 0.


def test_full_stdout_exits_2(source):
    with open("/dev/full", "wb") as full:
        proc = castpile(source, stdout=full)
    assert proc.returncode == 2
    assert proc.stderr.decode() == "castpile: cannot write to stdout: No space left on device\n"


@pytest.mark.parametrize(
    "argv",
    [["SRC", "--diff"], ["--version"], ["--help"], ["cache", "info", "--dir", "DIR"]],
    ids=["diff", "version", "help", "cache_info"],
)
def test_full_stdout_exits_2_in_other_modes(argv, tmp_path):
    src = tmp_path / "kern.py"
    src.write_bytes(KERNEL)
    argv = [{"SRC": src, "DIR": tmp_path / "cache"}.get(a, a) for a in argv]
    with open("/dev/full", "wb") as full:
        proc = castpile(*argv, stdout=full)
    assert proc.returncode == 2
    assert proc.stderr.decode() == "castpile: cannot write to stdout: No space left on device\n"


def test_file_size_limit_on_stdout_exits_2(tmp_path):
    src = tmp_path / "big.py"
    src.write_bytes(PLAIN * 10_000)
    limit = len(PLAIN) * 1000

    def cap():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    with open(tmp_path / "stdout", "wb") as f:
        proc = castpile(src, stdout=f, preexec_fn=cap)
    assert proc.returncode == 2
    assert proc.stderr.decode() == "castpile: cannot write to stdout: File too large\n"
    assert (tmp_path / "stdout").stat().st_size <= limit


# -o - is stdout, as - is stdin for SRC.


def test_o_dash_is_stdout(source, tmp_path):
    proc = castpile(source, "-o", "-", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout == expected(source)
    assert names(tmp_path) == [source.name]


def test_o_dash_is_stdout_in_process(source, tmp_path, monkeypatch, capsysbinary):
    monkeypatch.chdir(tmp_path)
    assert cli.main([str(source), "-o", "-"]) == 0
    assert capsysbinary.readouterr().out == expected(source)
    assert names(tmp_path) == [source.name]


# --diff with -o: the diff on stdout and OUT written.


def test_diff_with_o_writes_out_too(tmp_path):
    src, out = tmp_path / "kern.py", tmp_path / "out.py"
    src.write_bytes(KERNEL)
    proc = castpile(src, "--diff", "-o", out)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.decode().startswith(f"--- {src}\n+++ {src} (castpile)\n")
    assert out.read_bytes() == transpile(KERNEL, str(src))


# Several SRC: an input is never an output, however reached; all outputs are written or none.


@pytest.fixture
def two_sources(tmp_path):
    """``a/kern.py`` (uses castpile) and ``b/plain.py``, and an empty output directory ``out``."""
    for name, data in (("a/kern.py", KERNEL), ("b/plain.py", PLAIN)):
        (tmp_path / name).parent.mkdir()
        (tmp_path / name).write_bytes(data)
    (tmp_path / "out").mkdir()
    return tmp_path / "a" / "kern.py", tmp_path / "b" / "plain.py", tmp_path / "out"


@pytest.mark.parametrize("how", ["input_links_to_output", "output_links_to_input", "hard_link"])
def test_input_reached_from_another_output_is_refused(how, two_sources, tmp_path):
    kern, plain, out = two_sources
    if how == "input_links_to_output":  # plain.py is reached through a link to kern.py's output
        os.replace(plain, out / "kern.py")
        plain.symlink_to(out / "kern.py")
    elif how == "output_links_to_input":
        (out / "kern.py").symlink_to(plain)
    else:
        os.link(plain, out / "kern.py")
    before = {p: p.read_bytes() for p in (kern, plain, out / "kern.py")}
    listing = names(out)
    proc = castpile(kern, plain, "-o", out)
    err = proc.stderr.decode()
    assert proc.returncode == 2 and err.startswith("castpile: error: ") and "never overwrites its input" in err, err
    assert {p: p.read_bytes() for p in before} == before and names(out) == listing


def test_failed_second_write_writes_nothing(two_sources):
    """The second output cannot be staged (over the file-size limit): the first is not written either."""
    kern, plain, out = two_sources
    plain.write_bytes(PLAIN * 10_000)
    limit = len(PLAIN) * 1000

    def cap():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = castpile(kern, plain, "-o", out, preexec_fn=cap)
    assert proc.returncode == 2
    assert proc.stderr.decode() == f"castpile: error: {out / 'plain.py'}: cannot write: File too large\n"
    assert names(out) == []


@pytest.mark.parametrize("existing", [False, True], ids=["new", "replaced"])
def test_failed_second_rename_undoes_the_first(existing, two_sources):
    """The second output's rename fails (its path is a directory): the first is undone."""
    kern, plain, out = two_sources
    if existing:
        (out / "kern.py").write_bytes(b"previous\n")
        (out / "kern.py").chmod(0o640)
    (out / "plain.py").mkdir()
    proc = castpile(kern, plain, "-o", out)
    assert proc.returncode == 2 and "cannot write" in proc.stderr.decode()
    assert names(out) == (["kern.py", "plain.py"] if existing else ["plain.py"])
    if existing:
        assert (out / "kern.py").read_bytes() == b"previous\n"
        assert (out / "kern.py").stat().st_mode & 0o7777 == 0o640


# SIGTERM while a temporary file exists: it is removed, exit 128 + 15.

SIGTERMED = textwrap.dedent(
    """
    import os, sys, time
    import castpile.files


    def stalled_replace(*args, **kwargs):  # the temporary file is written: SIGTERM now
        print("staged", flush=True)
        time.sleep(60)


    os.replace = stalled_replace
    target = sys.argv[2]
    if sys.argv[1] == "write_atomically":
        castpile.files.write_atomically(target, b"x = 1\\n" * 1000)
    else:
        from castpile import cli
        sys.exit(cli.main([sys.argv[3], "-o", target]))
    """
)


@pytest.fixture
def plain_file(tmp_path):
    path = tmp_path / "plain.py"
    path.write_bytes(PLAIN)
    return path


@pytest.mark.parametrize("how", ["write_atomically", "cli"])
def test_sigterm_while_writing_leaves_no_temporary_file(how, plain_file, tmp_path):
    out = tmp_path / "out.py"
    child = subprocess.Popen(
        [sys.executable, "-c", SIGTERMED, how, str(out), str(plain_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert child.stdout.readline() == b"staged\n"
        assert any(p.name.endswith(".tmp") for p in tmp_path.iterdir())
        child.send_signal(signal.SIGTERM)
        child.wait(timeout=CHILD_TIMEOUT_S)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == 128 + signal.SIGTERM, child.stderr.read().decode()
    assert names(tmp_path) == [plain_file.name]


def test_write_atomically_leaves_sigterm_as_it_found_it(tmp_path):
    before = signal.getsignal(signal.SIGTERM)
    write_atomically(tmp_path / "x.py", b"x = 1\n")
    assert signal.getsignal(signal.SIGTERM) == before
    assert (tmp_path / "x.py").read_bytes() == b"x = 1\n"


def test_version():
    proc = castpile("--version")
    assert proc.returncode == 0 and proc.stdout == f"castpile {__version__}\n".encode()
