"""Bytes libcst does not keep as read (a BOM, CR-only line breaks, form feeds in
indentation) come out as they went in; input Python accepts but libcst nests or
refuses (8,000-operand `and` chains, 4,000 concatenated strings) transpiles or
gets a located diagnostic, and never crashes the process."""

import re
import subprocess
import sys
import textwrap

import pytest

import castpile
from castpile.compiler.errors import source_line
from testkit.diagnostics import diagnostics_of

KERNEL = b"""import triton
import triton.language as tl
from castpile import multicast_like

@triton.jit
def k(out, dev_ptrs, n, W: tl.constexpr, BLOCK: tl.constexpr):
    bufs = multicast_like(out, dev_ptrs[:W], shape=(n,))
    offs = tl.arange(0, BLOCK)
    x = bufs[offs]
    tl.store(out + offs, tl.sum(x, axis=0))
"""
REWRITTEN = {7, 9}  # 1-based lines of KERNEL whose code castpile replaces
BOM = b"\xef\xbb\xbf"


def transpile(source: bytes) -> bytes:
    return castpile.transpile(source, "k.py")


# ---- byte order mark -------------------------------------------------------------


def test_bom_stays_at_the_start_only():
    plain = transpile(KERNEL)
    out = transpile(BOM + KERNEL)
    assert out == BOM + plain
    assert out.count(BOM) == 1
    compile(out, "x.py", "exec")


# ---- form feeds ------------------------------------------------------------------


def with_line(source: bytes, number: int, line: bytes) -> bytes:
    lines = source.split(b"\n")
    lines[number - 1] = line
    return b"\n".join(lines)


@pytest.mark.parametrize("number", [1, 4, 5, 6, 8, 10])
@pytest.mark.parametrize("form_feeds", [b"\f", b"\f\f", b"  \f", b"\t\f \f"])
def test_form_feed_starting_an_untouched_line_is_kept(number, form_feeds):
    """Python resets indentation at a form feed: what precedes it is kept byte for byte."""
    line = KERNEL.split(b"\n")[number - 1]
    source = with_line(KERNEL, number, form_feeds + line)
    assert transpile(source) == with_line(transpile(KERNEL), number, form_feeds + line)


def test_form_feed_before_a_rewritten_statement_is_kept():
    source = with_line(KERNEL, 9, b"\f    x = bufs[offs]")
    plain = transpile(KERNEL)
    assert transpile(source) == with_line(plain, 9, b"\f" + plain.split(b"\n")[8])


def test_form_feeds_everywhere_else_are_kept():
    """Before `else`, a comment, a continuation line, a blank line, a dedent, the end; after a BOM."""
    source = (
        KERNEL.replace(
            b"    x = bufs[offs]\n",
            b"    if n > 0:\n        x = bufs[offs]\n\f    else:\n\f        x = bufs[offs + 1]\n"
            b"\f    # note\n    y = tl.arange(\n\f        0, BLOCK)\n\f\n",
        )
        + b"\fz = 1\n    \fw = 2\n\f\n"
    )
    expected = expected_output(source)
    assert transpile(source) == expected
    assert transpile(BOM + b"\f" + source) == BOM + b"\f" + expected
    compile(expected, "k.py", "exec")


def expected_output(source: bytes) -> bytes:
    """The output for ``source``: its lines as they are, but for the code castpile replaces."""
    as_python_reads_it = re.sub(rb"(?m)^[ \t\f]*\f", b"", source)  # indentation restarts at a form feed
    before, after = as_python_reads_it.split(b"\n"), transpile(as_python_reads_it).split(b"\n")
    for number, line in enumerate(source.split(b"\n")):
        if before[number] == after[number]:
            after[number] = line
        else:
            after[number] = line[: len(line) - len(before[number])] + after[number]
    return b"\n".join(after)


def test_diagnostic_column_and_line_on_a_form_feed_line():
    source = with_line(KERNEL, 9, b"  \f    x = bufs + 1")
    with pytest.raises(castpile.TranspileError) as caught:
        transpile(source)
    (found,) = caught.value.diagnostics
    assert (found.line, found.col) == (9, 12)  # the column of `bufs` in the line as written
    assert found.source_line == "  \f    x = bufs + 1"


def test_source_line_breaks_lines_where_python_does():
    """A form feed, a vertical tab or U+2028 in a line is no line break for Python."""
    text = "a = 1  # \f page\nb = '\u2028\x0b'\rc = 3\r\nd = 4"
    assert [source_line(text, n) for n in (1, 2, 3, 4, 5)] == [
        "a = 1  # \f page",
        "b = '\u2028\x0b'",
        "c = 3",
        "d = 4",
        "",
    ]
    source = KERNEL.replace(b"    x = bufs[offs]", b"    # \f page break\n    x = bufs + 1")
    with pytest.raises(castpile.TranspileError) as caught:
        transpile(source)
    assert caught.value.diagnostics[0].source_line == "    x = bufs + 1"


def test_what_libcst_alone_refuses_is_located_where_it_says(monkeypatch):
    """No input is known that Python takes and libcst refuses, beyond the repetitions measured first (below):
    a refusal stands in for one."""
    import libcst

    def refuse(source):
        raise libcst.ParserSyntaxError("unexpected token", lines=[""], raw_line=2, raw_column=4)

    monkeypatch.setattr(libcst, "parse_module", refuse)
    assert diagnostics_of(b"import castpile\nx = 1\n") == [(2, 5, "E010", {"detail": "unexpected token"})]


def test_a_stack_overflow_in_the_passes_is_located_at_the_deepest_expression(monkeypatch):
    """The passes run on a stack sized from the measured depth; should it still overflow, the error is located."""
    from castpile.compiler import pipeline

    def overflow(passes, levels):
        raise RecursionError

    monkeypatch.setattr(pipeline, "on_deep_stack", overflow)
    assert diagnostics_of(b"import castpile\nx = 1\ny = [(2,)]\n") == [(3, 7, "E007", {})]


# ---- CR-only line breaks -----------------------------------------------------------


def test_cr_only_file_with_a_multi_line_access_keeps_every_line():
    source = KERNEL.replace(b"x = bufs[offs]", b"x = bufs[\n        offs]").replace(b"\n", b"\r") + b"last = 1\r"
    out = transpile(source)
    assert b"\n" not in out
    before, after = source.split(b"\r"), out.split(b"\r")
    assert after[: len(before) - 1] == [
        line if number not in {7, 9, 10} else after[number - 1] for number, line in enumerate(before[:-1], 1)
    ]
    assert after[9].endswith(b")")  # the access's second line: its line break kept, inside the parenthesis
    assert after[11] == b"last = 1"
    compile(out, "k.py", "exec")


def test_nul_byte_is_located_on_cr_only_lines():
    assert diagnostics_of(b"import castpile\rx = 1\r\x00y = 2\r") == [(3, 1, "E002", {})]


# ---- nesting and repetition -------------------------------------------------------


def chain(operator: str, count: int) -> str:
    return f" {operator} ".join(["0"] * count)


def run_isolated(code: str, tmp_path, files: dict[str, bytes]) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter (a crash there fails the test, not pytest), next to ``files``."""
    for name, content in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=tmp_path, capture_output=True, timeout=300)


TRANSPILE_FILE = """
    import sys
    import castpile
    path = sys.argv[1] if len(sys.argv) > 1 else "deep.py"
    source = open(path, "rb").read()
    try:
        out = castpile.transpile(source, path)
    except castpile.TranspileError as error:
        print("\\n".join(f"{d.path}:{d.line}:{d.col} {d.id} {d.params}" for d in error.diagnostics))
    else:
        compile(out, path, "exec")
        print("same" if out == source else "rewritten")
"""


@pytest.mark.parametrize("operator, count", [("and", 8000), ("or", 8000), ("and", 4000), ("or", 4000), ("and", 19_000)])
def test_long_boolean_chain_transpiles(tmp_path, operator, count):
    source = f"import castpile\n\n\nx = {chain(operator, count)}\ny = 1\n".encode()
    proc = run_isolated(TRANSPILE_FILE, tmp_path, {"deep.py": source})
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert proc.stdout.decode().strip() == "same"


@pytest.mark.parametrize("count", [4000, 8000])
def test_long_boolean_chain_beside_a_rewritten_access_transpiles(tmp_path, count):
    lines = KERNEL.split(b"\n")
    lines.insert(9, f"    y = bufs[offs + ({chain('and', count)})]".encode())
    proc = run_isolated(TRANSPILE_FILE, tmp_path, {"deep.py": b"\n".join(lines)})
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert proc.stdout.decode().strip() == "rewritten"


def test_chain_deeper_than_castpile_takes_is_located(tmp_path):
    source = f"import castpile\n\n\nx = 1\ny = (\n    {chain('or', 60_000)})\n".encode()
    proc = run_isolated(TRANSPILE_FILE, tmp_path, {"deep.py": source})
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert re.fullmatch(r"deep\.py:6:5 E006 \{'depth': 6000\d, 'limit': 20000\}\n", proc.stdout.decode())


@pytest.mark.parametrize(
    "body, position",
    [
        ("x = " + " ".join(['"a"'] * 4000), "4:5"),
        ("x = (\n" + "\n".join(["    'a'"] * 4000) + "\n)", "5:5"),
        ("x = 1\ny = f(1, " + " ".join(["b'a'"] * 3000) + ",\n  " + " ".join(["b'b'"] * 3001) + ")", "6:3"),
    ],
    ids=["one-line", "one-per-line", "second-argument"],
)
def test_too_many_concatenated_strings_are_located(tmp_path, body, position):
    source = f"import castpile\n\n\n{body}\nz = 1\n".encode()
    proc = run_isolated(TRANSPILE_FILE, tmp_path, {"deep.py": source})
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert proc.stdout.decode() == f"deep.py:{position} E009 {{'limit': 3000}}\n"


def test_concatenated_strings_libcst_takes_transpile(tmp_path):
    source = ("import castpile\n\n\nx = (\n" + "\n".join(["    'a'"] * 3000) + "\n)\n").encode()
    proc = run_isolated(TRANSPILE_FILE, tmp_path, {"deep.py": source})
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert proc.stdout.decode().strip() == "same"


def test_comprehension_with_too_many_for_clauses_is_located(tmp_path):
    clauses = " ".join(f"for a{i} in b" for i in range(3001))
    source = f"import castpile\n\n\nx = 1\ny = [a for a in b\n     {clauses}]\n".encode()
    proc = run_isolated(TRANSPILE_FILE, tmp_path, {"deep.py": source})
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert re.fullmatch(r"deep\.py:6:\d+ E008 \{'limit': 3000\}\n", proc.stdout.decode())


def test_import_hook_survives_deep_input(tmp_path):
    """Importing through the hook: a long chain imports, too many strings raise a located error."""
    files = {
        "deeppkg/__init__.py": b"",
        "deeppkg/chain.py": f"import castpile\n\nx = {chain('and', 8000)}\n".encode(),
        "deeppkg/strings.py": ("import castpile\n\nx = " + " ".join(["'a'"] * 4000) + "\n").encode(),
    }
    code = """
        import castpile
        castpile.install_import_hook("deeppkg", cache_dir="cache")
        import deeppkg.chain
        assert deeppkg.chain.x == 0
        try:
            import deeppkg.strings
        except SyntaxError as error:
            print(error)
    """
    proc = run_isolated(code, tmp_path, files)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert re.search(r"strings\.py:3:5: error: .* \[castpile:E009\]\n", proc.stdout.decode())
