"""``castpile run SCRIPT [ARGS...]`` (and ``python -m castpile run``, ``torchrun -m castpile run``): a script
run as ``__main__``, transpiled, the modules next to it under the import hook; its exit status; located errors."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import castpile
from castpile import cli
from castpile.plain_args import plain_form
from compile_sm90 import Job, compile_for_sm90
from testkit.run import FAIL_LINE, MODULE, SCRIPT

REPO = Path(__file__).resolve().parents[1]
SIGNATURE = {"out": "*fp32", "table": "*i64", "n": "i32", "W": "constexpr", "BLOCK": "constexpr"}


@pytest.fixture
def scripts(tmp_path):
    (tmp_path / "kernels_next_door.py").write_text(MODULE)
    (tmp_path / "script.py").write_text(SCRIPT)
    return tmp_path


def castpile_run(directory: Path, *command: str) -> subprocess.CompletedProcess:
    """``command`` (from ``sys.executable``: the test's body names it, for its tier) run in ``directory``."""
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "TRITON_INTERPRET": "1",
        "CASTPILE_CACHE_DIR": str(directory / "cache"),
    }
    return subprocess.run(command, cwd=directory, env=env, capture_output=True, text=True, timeout=240)


def test_the_script_runs_transpiled_with_its_arguments_and_status(scripts):
    result = castpile_run(scripts, sys.executable, "-m", "castpile", "run", "script.py", "7", "--not-castpiles")
    assert result.returncode == 7, result.stderr
    assert result.stdout == "argv: ['script.py', '7', '--not-castpiles'] kernels: True rank: None\nmain: True True\n"


def test_options_come_before_the_script_and_the_console_entry_runs_it(scripts):
    entry = ("-c", "import sys; from castpile.cli import main; sys.exit(main(sys.argv[1:]))")
    result = castpile_run(scripts, sys.executable, *entry, "run", "--strategy", "gather", "script.py", "--strategy")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("argv: ['script.py', '--strategy'] kernels: True")


@pytest.mark.parametrize("cache_state", ["usable", "world-writable"])
def test_an_uncaught_exception_exits_1_with_the_users_files_and_lines(scripts, cache_state):
    if cache_state == "world-writable":  # the script and the module are transpiled in memory
        (scripts / "cache").mkdir()
        os.chmod(scripts / "cache", 0o777)
    result = castpile_run(scripts, sys.executable, "-W", "ignore", "-m", "castpile", "run", "script.py", "fail")
    assert result.returncode == 1
    module_line = MODULE.splitlines().index('    raise ValueError("raised in the module")') + 1
    assert result.stderr == (
        "Traceback (most recent call last):\n"
        f'  File "{scripts / "script.py"}", line {FAIL_LINE}, in <module>\n'
        "    kernels_next_door.fail()\n"
        f'  File "{scripts / "kernels_next_door.py"}", line {module_line}, in fail\n'
        '    raise ValueError("raised in the module")\n'
        "ValueError: raised in the module\n"
    )


def test_sys_exit_with_a_message_prints_it_and_exits_1(scripts):
    result = castpile_run(scripts, sys.executable, "-m", "castpile", "run", "script.py", "message")
    assert (result.returncode, result.stderr) == (1, "leaving with a message\n")


@pytest.mark.parametrize("broken", ["script.py", "kernels_next_door.py"])
def test_a_castpile_error_is_located_and_exits_1(scripts, broken):
    path = scripts / broken
    text = path.read_text()
    path.write_text(text.replace("tl.store(out + offs, tl.", "tl.store(out + offs, bufs + 1 + tl."))
    line = text.splitlines().index(next(s for s in text.splitlines() if "tl.store(out + offs, tl." in s)) + 1
    result = castpile_run(scripts, sys.executable, "-m", "castpile", "run", "script.py")
    assert result.returncode == 1
    shown = path.name if broken == "script.py" else path
    assert result.stderr.startswith(f"{shown}:{line}:26: error: 'bufs' is a multicast tensor")
    assert "Traceback" not in result.stderr


def test_a_missing_script_or_no_script_is_a_usage_error(scripts):
    result = castpile_run(scripts, sys.executable, "-m", "castpile", "run", "missing.py")
    assert (result.returncode, result.stderr) == (
        2,
        "castpile run: error: missing.py: cannot read: No such file or directory\n",
    )
    result = castpile_run(scripts, sys.executable, "-m", "castpile", "run")
    assert result.returncode == 2 and "the following arguments are required: SCRIPT" in result.stderr


def test_torchrun_starts_castpile_run(scripts):
    result = castpile_run(
        scripts,
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        "1",
        "-m",
        "castpile",
        "run",
        "script.py",
    )
    assert result.returncode == 0, result.stderr
    assert "argv: ['script.py'] kernels: True rank: 0\n" in result.stdout


def test_run_is_a_subcommand_and_a_file_named_run_is_written_dot_slash_run(tmp_path, monkeypatch, capsysbinary):
    assert plain_form(["run", "x.py"]) is None and plain_form(["run"]) is None
    assert plain_form(["./run", "-o", "out.py"]) == ("./run", "out.py")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run").write_text(MODULE)
    assert cli.main(["./run", "-o", "out.py"]) == 0
    assert (tmp_path / "out.py").read_bytes() == castpile.transpile(MODULE.encode(), "./run")


def test_help_lists_the_exit_codes(capsysbinary):
    assert cli.main(["--help"]) == 0
    out = capsysbinary.readouterr().out.decode()
    assert "exit status:\n  0  success\n  1  diagnostics in the input" in out
    assert "  2  usage or I/O error" in out and "  3  internal error" in out and "castpile run exits with" in out
    assert cli.main(["run", "--help"]) == 0
    assert "Exit status: the script's" in capsysbinary.readouterr().out.decode()


def test_the_run_kernels_compile_for_sm90(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), str(REPO)]))  # the script imports the module
    jobs = []
    for name, text, kernel in (("script_out", SCRIPT, "stack_sum"), ("kernels_next_door", MODULE, "stack_max")):
        module = tmp_path / f"{name}.py"
        module.write_bytes(castpile.transpile(text.encode(), f"{name}.py"))
        jobs.append(Job(module, kernel, SIGNATURE, {"W": 3, "BLOCK": 16}))
    results = compile_for_sm90(jobs, tmp_path)
    assert all(r.ok for r in results.values()), {name: r.error for name, r in results.items()}


def test_castpile_failing_on_the_script_is_an_internal_error(scripts, monkeypatch, capsys):
    import castpile.compiler

    def broken(*args, **kwargs):
        raise RuntimeError("a castpile bug")

    monkeypatch.setenv("CASTPILE_CACHE_DIR", str(scripts / "cache"))
    monkeypatch.setattr(castpile.compiler, "transpile_source", broken)
    assert cli.main(["run", str(scripts / "script.py")]) == 3
    err = capsys.readouterr().err
    assert err.startswith(f"castpile: internal error while transpiling {scripts / 'script.py'}: this is a bug")
    assert "RuntimeError: a castpile bug" in err


# A program as a zipapp, a directory or a package run with -m: ``__main__`` imports the kernel module beside it,
# which the hook transpiles, launches its kernel against torch, and prints what Python set for it.
ARCHIVE_MAIN = """\
import sys

import torch

import {kernels} as kernels

bufs = [torch.arange(10, dtype=torch.float32) * (w + 1) - 4 for w in range(3)]
table = torch.tensor([b.data_ptr() for b in bufs], dtype=torch.int64)
out = torch.zeros(10)
kernels.stack_max[(1,)](out, table, 10, W=3, BLOCK=16)
print("kernels:", torch.equal(out, torch.stack(bufs).max(dim=0).values))
print("argv:", sys.argv, "file:", __file__, "path0:", sys.path[0], "spec:", __spec__ and __spec__.name)
if sys.argv[1:2] == ["fail"]:
    kernels.fail()
sys.exit(int(sys.argv[1]) if sys.argv[1:2] and sys.argv[1].isdigit() else None)
"""
FAIL_IN_MODULE = MODULE.splitlines().index('    raise ValueError("raised in the module")') + 1


def program(directory: Path, kernels: str = "kernels_next_door") -> Path:
    directory.mkdir()
    (directory / "kernels_next_door.py").write_text(MODULE)
    (directory / "__main__.py").write_text(ARCHIVE_MAIN.format(kernels=kernels))
    return directory


def test_a_zipapp_runs_as_python_runs_it_transpiled(tmp_path):
    import zipapp

    zipapp.create_archive(program(tmp_path / "app"), tmp_path / "app.pyz")
    result = castpile_run(tmp_path, sys.executable, "-m", "castpile", "run", "app.pyz", "5", "-x")
    assert result.returncode == 5, result.stderr
    archive = tmp_path / "app.pyz"
    assert result.stdout == (
        f"kernels: True\nargv: ['app.pyz', '5', '-x'] file: {archive / '__main__.py'} path0: {archive} spec: __main__\n"
    )
    python = castpile_run(tmp_path, sys.executable, "app.pyz", "5", "-x")  # the same, but for the transpiling
    assert python.returncode == 1 and "multicast_like only has meaning inside a kernel that castpile" in python.stderr
    failed = castpile_run(tmp_path, sys.executable, "-m", "castpile", "run", "app.pyz", "fail")
    assert failed.returncode == 1
    assert failed.stderr.endswith(
        f'  File "{archive / "kernels_next_door.py"}", line {FAIL_IN_MODULE}, in fail\n'
        '    raise ValueError("raised in the module")\n'
        "ValueError: raised in the module\n"
    )


def test_a_directory_with_a_main_runs_as_python_runs_it(tmp_path):
    directory = program(tmp_path / "app")
    result = castpile_run(tmp_path, sys.executable, "-m", "castpile", "run", "app", "a")
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith(
        f"argv: ['app', 'a'] file: {directory / '__main__.py'} path0: {directory} spec: __main__\n"
    )
    assert result.stdout.startswith("kernels: True\n")


@pytest.mark.parametrize("form", [["-m", "pkg"], ["-mpkg"], ["-m", "pkg.__main__"]])
def test_a_module_runs_as_python_dash_m_runs_it_transpiled(tmp_path, form):
    package = program(tmp_path / "pkg", kernels="pkg.kernels_next_door")
    (package / "__init__.py").write_text("")
    result = castpile_run(tmp_path, sys.executable, "-m", "castpile", "run", "--strategy", "gather", *form, "3", "-m")
    assert result.returncode == 3, result.stderr
    main = package / "__main__.py"
    assert result.stdout == (
        f"kernels: True\nargv: ['{main}', '3', '-m'] file: {main} path0: {tmp_path} spec: pkg.__main__\n"
    )
    python = castpile_run(tmp_path, sys.executable, *form, "3", "-m")
    assert python.returncode == 1 and "castpile.multicast_like only has meaning" in python.stderr


def test_a_module_that_uses_castpile_itself_runs_transpiled_with_dash_m(tmp_path):
    (tmp_path / "script.py").write_text(SCRIPT)
    (tmp_path / "kernels_next_door.py").write_text(MODULE)
    result = castpile_run(tmp_path, sys.executable, "-m", "castpile", "run", "-m", "script", "4")
    assert result.returncode == 4, result.stderr
    assert result.stdout.startswith(f"argv: [{str(tmp_path / 'script.py')!r}, '4'] kernels: True rank: None\n")
    failed = castpile_run(tmp_path, sys.executable, "-m", "castpile", "run", "-m", "script", "fail")
    assert failed.returncode == 1
    assert failed.stderr.startswith(
        f'Traceback (most recent call last):\n  File "{tmp_path / "script.py"}", line {FAIL_LINE}, in <module>\n'
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-m", "nowhere"], "castpile run: error: -m nowhere: no module named 'nowhere'\n"),
        (["-m", "pkg"], "castpile run: error: -m pkg: 'pkg' is a package without a __main__ module, "),
        (["empty"], "castpile run: error: empty: this directory holds no __main__.py to run\n"),
        (["bare.pyz"], "castpile run: error: bare.pyz: this zip archive holds no __main__.py to run\n"),
    ],
)
def test_what_python_cannot_run_is_a_usage_error_naming_it(tmp_path, argv, message):
    import zipfile

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "empty").mkdir()
    with zipfile.ZipFile(tmp_path / "bare.pyz", "w") as z:
        z.writestr("other.py", "x = 1\n")
    result = castpile_run(tmp_path, sys.executable, "-m", "castpile", "run", *argv)
    assert result.returncode == 2 and result.stderr.startswith(message) and "Traceback" not in result.stderr


def test_a_package_failing_to_import_under_dash_m_is_the_users_error(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("1 / 0\n")
    result = castpile_run(tmp_path, sys.executable, "-m", "castpile", "run", "-m", "pkg.mod")
    assert result.returncode == 1
    assert result.stderr == (
        "castpile run: error: -m pkg.mod: error while finding module specification for 'pkg.mod' "
        "(ZeroDivisionError: division by zero)\n"
    )


@pytest.mark.parametrize("how", [["script.py"], ["-m", "pkg"], ["app.pyz"]])
def test_a_program_that_does_not_compile_is_reported_as_python_reports_it(tmp_path, how):
    import zipapp

    (tmp_path / "script.py").write_text("x = (\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "__main__.py").write_text("x = (\n")
    zipapp.create_archive(tmp_path / "pkg", tmp_path / "app.pyz")
    where = {"script.py": tmp_path / "script.py", "-m": tmp_path / "pkg" / "__main__.py"}.get(
        how[0], tmp_path / "app.pyz" / "__main__.py"
    )
    result = castpile_run(tmp_path, sys.executable, "-m", "castpile", "run", *how)
    assert (result.returncode, result.stderr) == (
        1,
        f"  File \"{where}\", line 1\n    x = (\n        ^\nSyntaxError: '(' was never closed\n",
    )
