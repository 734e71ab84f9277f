"""Mutation fuzzing: random edits of valid kernels give either output that parses (and, for
edits that keep the kernel valid, compiles for sm_90), or located diagnostics; never an
internal error.  CI size: ``CASTPILE_FUZZ_EXAMPLES`` (default 300) edits, derandomized."""

import ast
import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import castpile
from castpile import TranspileError
from castpile.compiler.diagnostics import CATALOGUE
from compile_sm90 import Job, compile_for_sm90
from fuzz_model import Case, Index
from fuzz_source import constexprs, signature, source
from testkit.diagnostics import message_pattern

EXAMPLES = int(os.environ.get("CASTPILE_FUZZ_EXAMPLES", "300"))
SAMPLES = sorted((Path(__file__).resolve().parents[1] / "samples").glob("*.py"))


def _seed_case(**changes) -> Case:
    base = dict(
        tile="tile2",
        ptile=(2, 2),
        entries=[0, 1, None, 2],
        lo=0,
        dtype="float32",
        shape=(9, 5),
        strides=(5, 1),
        explicit_strides=True,
        indices=[Index(-1, 8, 0), Index(2, 4, 1)],
        irank=2,
        context="tl_store",
        op="",
        value="row_none",
        use_mask=True,
        importer="from_as",
        seed=0,
    )
    base.update(changes)
    return Case(**base)


def _seed(**changes) -> bytes:
    return source(_seed_case(**changes)).encode()


SEEDS = [
    _seed(),
    _seed(tile="slice", ptile=(4,), entries=[0, 1, 2, None], context="aug", op="+", use_mask=False, importer="module"),
    _seed(
        tile="tile1", ptile=(4,), entries=[0, None, 1, 2], context="atomic", op="max", value="full", importer="alias"
    ),
    _seed(
        shape=None,
        strides=(1,),
        explicit_strides=False,
        indices=[Index(0, 8, 0)],
        irank=1,
        context="load",
        use_mask=False,
    ),
] + [p.read_bytes() for p in SAMPLES]
TOKENS = [
    b"bufs",
    b"[",
    b"]",
    b"(",
    b")",
    b",",
    b":",
    b"=",
    b"+=",
    b" ",
    b"\n",
    b"\t",
    b"\\\n",
    b"#",
    b'"',
    b"None",
    b"0",
    b"-1",
    b"multicast_like(",
    b"shape=",
    b"strides=",
    b"ptr_mask=",
    b"tl.load(",
    b"castpile.signal(",
    b"*",
    b"bufs[0]",
    b"bufs = ",
    b"def ",
    b"lambda: ",
    b"@triton.jit\n",
    b"import castpile as cast\n",
    b"\xff",
    b"\r\n",
]


@st.composite
def edits(draw) -> bytes:
    """A seed kernel with 1-4 random byte-level edits."""
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        kind = draw(st.sampled_from(["delete", "insert", "duplicate", "swap_lines"]))
        if kind == "delete":
            del data[at : at + draw(st.integers(1, 12))]
        elif kind == "insert":
            data[at:at] = draw(st.sampled_from(TOKENS))
        elif kind == "duplicate":
            data[at:at] = data[at : at + draw(st.integers(1, 40))]
        else:
            lines = bytes(data).split(b"\n")
            i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
            data = bytearray(b"\n".join(lines))
    return bytes(data)


def _parses(data: bytes) -> bool:
    try:
        ast.parse(data)
        return True
    except (SyntaxError, ValueError):
        return False


# Every message castpile gives, by id: the catalogue's (docs/language.md, "Errors"), each parameter any text.
KNOWN_MESSAGES = {id: message_pattern(message) for id, message in CATALOGUE.items()}


def check_diagnostics(exc: TranspileError, data: bytes, path: str) -> None:
    """What can be checked of random input's diagnostics: each names ``path``, a line of the
    file and a column of that line (bytes, plus one past the end), with a known message;
    none is repeated; the rendering shows them all."""
    lines = re.split(rb"\r\n|\r|\n", data)
    assert exc.diagnostics
    for d in exc.diagnostics:
        assert d.path == path, d
        assert 1 <= d.line <= len(lines), (d, len(lines))
        assert 1 <= d.col <= len(lines[d.line - 1]) + 1, (d, lines[d.line - 1])
        assert d.id in KNOWN_MESSAGES and KNOWN_MESSAGES[d.id].fullmatch(d.message), (d.id, d.message)
    keys = [(d.line, d.col, d.id, d.message) for d in exc.diagnostics]
    assert len(set(keys)) == len(keys), keys
    rendered = exc.render()
    assert rendered.startswith(f"{path}:")
    assert [line for line in rendered.splitlines() if line.startswith(f"{path}:")] == [
        f"{path}:{d.line}:{d.col}: error: {d.message} [castpile:{d.id}]" for d in exc.diagnostics
    ]


@settings(
    max_examples=EXAMPLES, derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(data=edits(), strategy=st.sampled_from(castpile.STRATEGIES))
def test_random_edits_never_crash(data, strategy):
    try:
        out = castpile.transpile(data, "mutant.py", strategy=strategy)
    except TranspileError as exc:
        check_diagnostics(exc, data, "mutant.py")
        return
    if _parses(data) or out != data:
        assert _parses(out), out.decode(errors="replace")


# Edits that keep a kernel valid: the output must compile for sm_90.
LAYOUT_EDITS = [
    lambda s: s.replace(b"    bufs = ", b"    # a comment\n    bufs = ", 1).replace(b"\n\n\n@", b"\n@", 1),
    lambda s: s.replace(b"bufs[", b"bufs[\n        ", 1).replace(b"(example,", b"(\n        example,", 1),
    lambda s: s.replace(b"bufs[i0, i1]", b"(bufs)[(i0), (i1)]").replace(b"\n", b"\r\n"),
    lambda s: s.replace(b"shape=(n0, n1, ), strides=(5, 1, )", b"strides=(5, 1), shape=(n0, n1)"),
]
SIGNATURE = signature(_seed_case())


def test_layout_edits_compile_for_sm90(tmp_path):
    jobs = []
    for i, edit in enumerate(LAYOUT_EDITS):
        mutant = edit(SEEDS[0])
        assert mutant != SEEDS[0]
        for strategy in castpile.STRATEGIES:
            out = castpile.transpile(mutant, f"layout{i}.py", strategy=strategy)
            assert out.count(b"\n") > mutant.count(b"\n")
            path = tmp_path / f"layout{i}_{strategy}.py"
            path.write_bytes(out)
            jobs.append(Job(path, "kernel", SIGNATURE, constexprs(_seed_case()), name=path.stem))
    results = compile_for_sm90(jobs, tmp_path)
    assert all(r.ok for r in results.values()), {name: r.error for name, r in results.items() if not r.ok}


def test_a_misspelled_castpile_import_gives_a_known_diagnostic():
    """Found by the long run (scripts/fuzz_long.sh 2000): an edit to ``from castpile import ulticast_like`` leaves
    ``multicast_like`` unbound; its located error was missing from the known messages."""
    source = (
        b"import triton\nimport triton.language as tl\nfrom castpile import ulticast_like\n\n\n@triton.jit\n"
        b"def k(out, table, W: tl.constexpr):\n    bufs = multicast_like(out, table[:W])\n    bufs[0] = 1\n"
    )
    with pytest.raises(TranspileError) as info:
        castpile.transpile(source, "mutant.py")
    check_diagnostics(info.value, source, "mutant.py")
