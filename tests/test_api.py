"""castpile's kernel-language names as editors, type checkers and untranspiled code see them: real
signatures and docstrings, ``castpile.Multicast`` for annotations, the how-to error at run time, and
mypy over the samples."""

import inspect
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import castpile

ROOT = Path(__file__).resolve().parents[1]
HOW = "only has meaning inside a kernel that castpile has transpiled"
SIGNATURES = {  # written from the language contract, parameter by parameter
    "multicast_like": [
        ("example", inspect.Parameter.empty),
        ("ptr_tile", inspect.Parameter.empty),
        ("shape", None),
        ("strides", None),
        ("ptr_mask", None),
        ("align", None),
        ("remote", None),
    ],
    "signal": [
        ("ptrs", inspect.Parameter.empty),
        ("value", 1),
        ("wait_for", None),
        ("sem", "release"),
        ("scope", "sys"),
        ("mask", None),
        ("op", "set"),
    ],
    "wait": [
        ("ptrs", inspect.Parameter.empty),
        ("value", 1),
        ("cmp", "eq"),
        ("sem", "acquire"),
        ("scope", "sys"),
        ("reset", 0),
        ("mask", None),
        ("decrement", False),  # v1.3: after v1.2's parameters, so their positions stand
    ],
}


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_signature_is_the_contracts(name):
    parameters = inspect.signature(getattr(castpile, name)).parameters.values()
    assert [(p.name, p.default) for p in parameters] == SIGNATURES[name]
    assert all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in parameters)


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_docstring_has_an_example_and_says_how_to_transpile(name):
    doc = inspect.getdoc(getattr(castpile, name))
    assert f"castpile.{name}(" in doc and "::\n" in doc, doc  # an example kernel line, as a literal block
    assert "RuntimeError" in doc and "transpiled" in doc


@pytest.mark.parametrize("name", sorted(SIGNATURES))
@pytest.mark.parametrize(
    "args, kwargs",
    [((), {}), ((1, 2, 3, 4, 5, 6, 7, 8), {}), ((None,), {"bogus": 1})],
    ids=["no-arguments", "too-many", "unknown-keyword"],
)
def test_untranspiled_call_says_how_to_transpile_whatever_the_arguments(name, args, kwargs):
    with pytest.raises(RuntimeError, match=f"castpile.{name} {HOW}"):
        getattr(castpile, name)(*args, **kwargs)


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_triton_builtin_attribute_says_how_to_transpile(name):
    """What Triton's JIT reads from every global a kernel references (see castpile._Marker)."""
    with pytest.raises(RuntimeError, match=f"castpile.{name} {HOW}"):
        getattr(castpile, name).__triton_builtin__  # noqa: B018 (the access is what raises)


def test_help_shows_the_signature():
    import pydoc

    text = pydoc.plaintext.document(castpile.wait)
    assert "wait(ptrs: 'Any', value: 'Any' = 1, cmp: 'str' = 'eq'" in text, text


def test_multicast_is_a_documented_class_for_annotations():
    assert inspect.isclass(castpile.Multicast) and "Multicast" in castpile.__all__
    doc = inspect.getdoc(castpile.Multicast)
    assert "bufs: castpile.Multicast" in doc and "@triton.jit" in doc
    assert inspect.signature(castpile.multicast_like).return_annotation == "Multicast"
    with pytest.raises(RuntimeError, match=f"castpile.Multicast {HOW}"):
        castpile.Multicast()[0]


def test_package_is_marked_typed():
    assert (Path(castpile.__file__).parent / "py.typed").is_file()


def mypy(tmp_path: Path, *files: Path) -> list[str]:
    """mypy's error lines for ``files``, checked from the repository root.  The modules they import are
    analysed but not reported on (``--follow-imports=silent``), as for a package installed with py.typed."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--cache-dir",
            str(tmp_path / "mypy-cache"),
            "--follow-imports=silent",
            "--no-error-summary",
            "--hide-error-context",
            *map(str, files),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    errors = [line for line in proc.stdout.splitlines() if ": error:" in line]
    assert proc.returncode == (1 if errors else 0) and not proc.stderr, proc.stdout + proc.stderr
    return errors


@pytest.mark.subprocess
def test_mypy_over_the_samples_reports_nothing_from_castpile(tmp_path):
    samples = sorted((ROOT / "samples").glob("*.py"))
    errors = mypy(tmp_path, ROOT / "castpile" / "__init__.py", *samples)  # the names' module itself, too
    # Triton ships no type information; that is the only error mypy may report on the samples.
    untyped_triton = [e for e in errors if '"triton' in e and "[import-untyped]" in e]
    assert errors == untyped_triton, "\n".join(errors)


MISUSES = textwrap.dedent("""\
    import castpile


    def helper(bufs: castpile.Multicast, i: int) -> None:
        bufs[i] += 1
        bufs.shape


    def kernel(out: int, table: int) -> None:
        bufs = castpile.multicast_like(out, table, alignment=16)
        helper(castpile.multicast_like(out, table), 0)
        helper(out, 0)
        castpile.signal(bufs[0], 1, None, "release", "sys", None, "set", 3)
        castpile.wait(out, valu=1)
        castpile.wait(out, cmp="ge", reset=None)
        flag: int = castpile.signal(bufs[0])
""")


@pytest.mark.subprocess
def test_mypy_sees_the_signatures(tmp_path):
    """A control for the samples' check: misuses of castpile's names are errors, on their lines."""
    source = tmp_path / "misuses.py"
    source.write_text(MISUSES)
    errors = mypy(tmp_path, source)
    lines = sorted(int(e.split(":")[1]) for e in errors)
    assert lines == [6, 10, 12, 13, 14, 16], "\n".join(errors)
    assert 'Unexpected keyword argument "alignment" for "multicast_like"' in "\n".join(errors)
