"""Options are checked where they enter: a bad strategy fails at once, in every front end."""

import pytest

import castpile
from castpile import cli


def test_install_import_hook_refuses_an_unknown_strategy_at_once(tmp_path):
    import sys

    before = list(sys.meta_path)
    with pytest.raises(ValueError, match="unknown strategy 'bogus': choose one of loop, gather"):
        castpile.install_import_hook("somepkg", cache_dir=tmp_path, strategy="bogus")
    assert sys.meta_path == before


def test_transpile_refuses_an_unknown_strategy_even_without_castpile():
    with pytest.raises(ValueError, match="unknown strategy 'bogus'"):
        castpile.transpile(b"x = 1\n", strategy="bogus")


def test_cli_refuses_an_unknown_strategy(tmp_path, capsys):
    src = tmp_path / "k.py"
    src.write_bytes(b"x = 1\n")
    assert cli.main([str(src), "--strategy", "bogus"]) == 2
    assert "argument --strategy: invalid choice: 'bogus'" in capsys.readouterr().err


def test_version_is_one_string_everywhere(capsys):
    from castpile.options import VERSION

    assert castpile.__version__ == VERSION
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out == f"castpile {VERSION}\n"
