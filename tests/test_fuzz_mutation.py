"""Mutation fuzzing: random edits of valid kernels give either output that parses (and, for
edits that keep the kernel valid, compiles for sm_90), or located diagnostics; never an
internal error.  CI size: ``CASTPILE_FUZZ_EXAMPLES`` (default 300) edits, derandomized."""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import castpile
from castpile import TranspileError
from fuzz_model import Case, Index, source

EXAMPLES = int(os.environ.get("CASTPILE_FUZZ_EXAMPLES", "300"))
SAMPLES = sorted((Path(__file__).resolve().parents[1] / "samples").glob("*.py"))


def _seed(**changes) -> bytes:
    base = dict(
        tile="tile2", ptile=(2, 2), entries=[0, 1, None, 2], lo=0, dtype="float32", shape=(9, 5), strides=(5, 1),
        explicit_strides=True, indices=[Index(-1, 8, 0), Index(2, 4, 1)], irank=2, context="tl_store", op="",
        value="row_none", use_mask=True, importer="from_as", seed=0,
    )
    base.update(changes)
    return source(Case(**base)).encode()


SEEDS = [
    _seed(),
    _seed(tile="slice", ptile=(4,), entries=[0, 1, 2, None], context="aug", op="+", use_mask=False, importer="module"),
    _seed(tile="tile1", ptile=(4,), entries=[0, None, 1, 2], context="atomic", op="max", value="full", importer="alias"),
    _seed(shape=None, strides=(1,), explicit_strides=False, indices=[Index(0, 8, 0)], irank=1, context="load", use_mask=False),
] + [p.read_bytes() for p in SAMPLES]
TOKENS = [
    b"bufs", b"[", b"]", b"(", b")", b",", b":", b"=", b"+=", b" ", b"\n", b"\t", b"\\\n", b"#", b'"', b"None",
    b"0", b"-1", b"multicast_like(", b"shape=", b"strides=", b"ptr_mask=", b"tl.load(", b"castpile.signal(", b"*",
    b"bufs[0]", b"bufs = ", b"def ", b"lambda: ", b"@triton.jit\n", b"import castpile as cast\n", b"\xff", b"\r\n",
]


@st.composite
def edits(draw) -> bytes:
    """A seed kernel with 1-4 random byte-level edits."""
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        kind = draw(st.sampled_from(["delete", "insert", "duplicate", "swap_lines"]))
        if kind == "delete":
            del data[at:at + draw(st.integers(1, 12))]
        elif kind == "insert":
            data[at:at] = draw(st.sampled_from(TOKENS))
        elif kind == "duplicate":
            data[at:at] = data[at:at + draw(st.integers(1, 40))]
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


@settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=edits(), strategy=st.sampled_from(castpile.STRATEGIES))
def test_random_edits_never_crash(data, strategy):
    try:
        out = castpile.transpile(data, "mutant.py", strategy=strategy)
    except TranspileError as exc:
        lines = data.count(b"\n") + 1
        assert exc.diagnostics
        for d in exc.diagnostics:
            assert d.path == "mutant.py" and 1 <= d.line <= lines and d.col >= 1 and d.message, d
        assert exc.render().startswith("mutant.py:")
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
SIGNATURE = {
    "example": "*fp32", "table": "*i64", "res": "*fp32", "vals": "*fp32", "mk": "*i32", "pm": "*i32",
    **{f"{c}{d}": "i32" for c in "ns" for d in range(3)}, "LO": "constexpr",
}
COMPILE = """
import importlib.util, json, sys
from triton.compiler import ASTSource, compile
from triton.backends.compiler import GPUTarget
failures = []
for path in sys.argv[2:]:
    spec = importlib.util.spec_from_file_location("m" + str(abs(hash(path))), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        compile(ASTSource(module.kernel, json.loads(sys.argv[1]), {"LO": 0}), target=GPUTarget("cuda", 90, 32))
    except Exception as exc:
        failures.append(f"{path}: {type(exc).__name__}: {exc}"[:2000])
print("\\n".join(failures))
sys.exit(1 if failures else 0)
"""


def test_layout_edits_compile_for_sm90(tmp_path):
    paths = []
    for i, edit in enumerate(LAYOUT_EDITS):
        mutant = edit(SEEDS[0])
        assert mutant != SEEDS[0]
        for strategy in castpile.STRATEGIES:
            out = castpile.transpile(mutant, f"layout{i}.py", strategy=strategy)
            assert out.count(b"\n") > mutant.count(b"\n")
            path = tmp_path / f"layout{i}_{strategy}.py"
            path.write_bytes(out)
            paths.append(str(path))
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", COMPILE, json.dumps(SIGNATURE), *paths], capture_output=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout.decode() + proc.stderr.decode()[-3000:]
