"""CASTPILE_DEBUG_WAITS and --debug-waits reach the transpiler from every front end, are part of the import hook's
cache key, and a bad value is one located sentence naming the variable or option, with nothing written."""

import inspect
import sys

import pytest

import castpile
from castpile import cli
from castpile.runner import run_main
from testkit import import_file

SOURCE = b"""\
import triton
import triton.language as tl
import castpile


@triton.jit
def waits(pad):
    castpile.wait(pad)
"""
DEBUG_CALL = "_castpile_wait_flags_until(pad, site="
NORMAL_CALL = "_castpile_wait_flags(pad)"


@pytest.fixture
def src(tmp_path):
    path = tmp_path / "waits.py"
    path.write_bytes(SOURCE)
    return path


def test_the_option_and_the_variable_reach_the_command_line(src, tmp_path, monkeypatch, capsysbinary):
    assert cli.main([str(src), "--debug-waits", "0.5"]) == 0
    assert f"{DEBUG_CALL}'{src}:8', deadline_ns=500000000)" in capsysbinary.readouterr().out.decode()
    monkeypatch.setenv("CASTPILE_DEBUG_WAITS", "3")
    out = tmp_path / "out.py"
    assert cli.main([str(src), "-o", str(out)]) == 0  # the plain form, without argparse
    assert f"{DEBUG_CALL}'{src}:8', deadline_ns=3000000000)" in out.read_text()
    assert cli.main([str(src), "--debug-waits", "1"]) == 0  # the option over the variable
    assert "deadline_ns=1000000000)" in capsysbinary.readouterr().out.decode()
    monkeypatch.delenv("CASTPILE_DEBUG_WAITS")
    assert cli.main([str(src)]) == 0
    assert NORMAL_CALL in capsysbinary.readouterr().out.decode()


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (["--debug-waits", "soon"], None, "--debug-waits='soon' is not a number of seconds"),
        (["--debug-waits", "0"], None, "--debug-waits='0' is not more than 0 seconds"),
        ([], "-1", "CASTPILE_DEBUG_WAITS='-1' is not more than 0 seconds"),
        ([], "2 s", "CASTPILE_DEBUG_WAITS='2 s' is not a number of seconds"),
    ],
)
def test_a_bad_value_is_a_usage_error_and_nothing_is_written(src, tmp_path, monkeypatch, capsysbinary, argv, env,
                                                              message):  # fmt: skip
    if env is not None:
        monkeypatch.setenv("CASTPILE_DEBUG_WAITS", env)
    out = tmp_path / "out.py"
    assert cli.main([str(src), "-o", str(out), *argv]) == 2
    err = capsysbinary.readouterr().err.decode()
    assert err.startswith(f"castpile: error: {message}: give how long a castpile.wait may spin before it gives up")
    assert "Traceback" not in err and not out.exists()


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf")])
def test_castpile_transpile_refuses_a_bad_value(bad):
    with pytest.raises(ValueError, match=r"give the seconds a castpile\.wait may spin, more than 0"):
        castpile.transpile(SOURCE, "waits.py", debug_waits=bad)


def test_castpile_run_refuses_a_bad_value(src, monkeypatch, capsys):
    monkeypatch.setenv("CASTPILE_DEBUG_WAITS", "never")
    assert run_main([str(src)]) == 2
    assert capsys.readouterr().err.startswith("castpile run: error: CASTPILE_DEBUG_WAITS='never' is not a number")


def _import_waits(package_dir, cache):
    """``hooked.waits`` imported through a fresh hook (``CASTPILE_DEBUG_WAITS`` as it is now), and its source text."""
    with castpile.install_import_hook("hooked", cache_dir=cache):
        import hooked.waits as module
    for name in ("hooked", "hooked.waits"):
        sys.modules.pop(name, None)
    return module.__loader__.get_source("hooked.waits")


def test_the_hook_keys_its_cache_by_the_seconds(tmp_path, monkeypatch):
    package = tmp_path / "hooked"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "waits.py").write_bytes(SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    cache = tmp_path / "cache"
    monkeypatch.delenv("CASTPILE_DEBUG_WAITS", raising=False)
    assert NORMAL_CALL in _import_waits(package, cache)
    monkeypatch.setenv("CASTPILE_DEBUG_WAITS", "2")
    debug = _import_waits(package, cache)  # the normal entry is not served
    assert f"{DEBUG_CALL}'{package / 'waits.py'}:8', deadline_ns=2000000000)" in debug
    monkeypatch.setenv("CASTPILE_DEBUG_WAITS", "4")
    assert "deadline_ns=4000000000)" in _import_waits(package, cache)
    monkeypatch.delenv("CASTPILE_DEBUG_WAITS")
    assert NORMAL_CALL in _import_waits(package, cache)  # nor a debug entry in normal mode
    assert len(list(cache.glob("hooked.waits-*.py"))) == 3
    monkeypatch.setenv("CASTPILE_DEBUG_WAITS", "nope")
    with pytest.raises(ValueError, match=r"^CASTPILE_DEBUG_WAITS='nope' is not a number of seconds"):
        castpile.install_import_hook("hooked", cache_dir=cache)


JIT_SOURCE = SOURCE.replace(b"@triton.jit", b"@castpile.jit")


def test_castpile_jit_reads_the_variable_when_it_decorates(tmp_path, monkeypatch):
    monkeypatch.setenv("CASTPILE_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "jitted.py"
    path.write_bytes(JIT_SOURCE)
    monkeypatch.setenv("CASTPILE_DEBUG_WAITS", "2")
    assert "_castpile_wait_flags_until(pad, site=" in inspect.getsource(import_file(path, "jitted_debug").waits.fn)
    monkeypatch.delenv("CASTPILE_DEBUG_WAITS")
    assert "_castpile_wait_flags(pad)" in inspect.getsource(import_file(path, "jitted_normal").waits.fn)
    monkeypatch.setenv("CASTPILE_DEBUG_WAITS", "0")
    with pytest.raises(ValueError, match=r"^CASTPILE_DEBUG_WAITS='0' is not more than 0 seconds"):
        import_file(path, "jitted_bad")
