"""Corpus: .py files of the installed triton package, with ``import castpile`` appended, come
back byte-identical.  CI checks a fixed sample; scripts/corpus_run.py runs all of triton,
torch and sympy (figures in docs/robustness.md)."""

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "corpus_run.py"
_spec = importlib.util.spec_from_file_location("corpus_run", SCRIPT)
corpus_run = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(corpus_run)

FILES = corpus_run.package_files("triton")
SAMPLE = sorted(set(FILES[::5]) | {max(FILES, key=lambda p: p.stat().st_size)})


def test_sample_is_substantial():
    assert len(FILES) >= 50 and len(SAMPLE) >= 20


@pytest.mark.parametrize("path", SAMPLE, ids=lambda p: p.name)
def test_triton_file_comes_back_identical(path):
    _name, verdict, detail = corpus_run.check_file((str(path), "loop"))
    assert verdict == "identical", detail


def test_with_import_appends_one_line():
    assert corpus_run.with_import(b"x = 1") == b"x = 1\nimport castpile\n"
    assert corpus_run.with_import(b"x = 1\r\n") == b"x = 1\r\nimport castpile\n"


def test_a_changed_output_is_a_failure(monkeypatch, tmp_path):
    import castpile

    path = tmp_path / "m.py"
    path.write_bytes(b"x = 1\n")
    monkeypatch.setattr(castpile, "transpile", lambda data, *a, **k: data + b"# changed\n")
    assert corpus_run.check_file((str(path), "loop"))[1] == "failure"
