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
