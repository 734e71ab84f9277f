"""The documents' code blocks as tests: ```python run blocks run on the CPU exactly as written (with the
```python file PATH blocks before them written beside them: a package), their kernels and the file blocks' compile
for sm_90, and every other python block (gpu, fragment) is valid Python (docs/README.md, "Code blocks that are
tests")."""

import ast
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import castpile
from compile_sm90 import Job, compile_for_sm90

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKERS = ("run", "gpu", "fragment", "file")
FENCE = re.compile(r"^```(\S*)[ \t]*(.*?)\s*$")
TABLE = {"out": "*fp32", "dev_ptrs": "*i64", "n": "i32", "WORLD": "constexpr", "BLOCK": "constexpr"}
KERNELS = {  # every kernel of a run block: its signature and constexprs for the sm_90 compile
    "allreduce_oneshot": (TABLE, {"WORLD": 4, "BLOCK": 128}),
    "one_shot_sum": (TABLE, {"WORLD": 3, "BLOCK": 128}),
    "all_reduce_sum": (TABLE, {"WORLD": 4, "BLOCK": 256}),  # the README's first screen, @castpile.jit
    "peer_max": (TABLE, {"WORLD": 3, "BLOCK": 256}),  # the README's hooked package
}


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence
    language: str
    marker: str
    text: str

    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    def kind(self) -> str:
        """The marker's first word (``file`` of ``file mypkg/kernels.py``)."""
        return self.marker.split(" ", 1)[0]


def fenced_blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a Markdown file whose fences start at column 0."""
    blocks, lines, i = [], path.read_text().split("\n"), 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening:
            end = next(j for j in range(i + 1, len(lines)) if lines[j].rstrip() == "```")
            blocks.append(Block(path, i + 1, opening[1], opening[2], "\n".join(lines[i + 1 : end]) + "\n"))
            i = end
        i += 1
    return blocks


PYTHON_BLOCKS = [b for path in DOCUMENTS for b in fenced_blocks(path) if b.language == "python"]
RUN_BLOCKS = [b for b in PYTHON_BLOCKS if b.marker == "run"]
FILE_BLOCKS = [b for b in PYTHON_BLOCKS if b.kind() == "file"]


def files_of(run: Block) -> list[Block]:
    """The ``file PATH`` blocks that ``run`` runs beside: those of its document after the run block before it."""
    before = max((b.line for b in RUN_BLOCKS if b.path == run.path and b.line < run.line), default=0)
    return [b for b in FILE_BLOCKS if b.path == run.path and before < b.line < run.line]


def definitions(text: str) -> str:
    """``text`` with its top-level statements other than imports and definitions blanked, every line kept: a
    module that compiling its kernels may import without running the program."""
    lines = text.split("\n")
    for node in ast.parse(text).body:
        if not isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)):
            assert node.end_lineno is not None
            lines[node.lineno - 1 : node.end_lineno] = [""] * (node.end_lineno - node.lineno + 1)
    return "\n".join(lines)


def jit_kernels(text: str) -> list[str]:
    """The names of the functions of ``text`` with a decorator whose name ends in ``jit``."""

    def decorator_name(node):
        node = node.func if isinstance(node, ast.Call) else node
        return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")

    return [
        f.name
        for f in ast.walk(ast.parse(text))
        if isinstance(f, ast.FunctionDef) and any(decorator_name(d).endswith("jit") for d in f.decorator_list)
    ]


def test_the_documents_have_blocks_of_every_kind():
    assert {b.kind() for b in PYTHON_BLOCKS} == set(MARKERS)
    # the README's first screen (a @castpile.jit script on simulated GPUs), its before snippet, its hooked
    # package's program, and the import hook's example
    assert {b.name() for b in RUN_BLOCKS} >= {"README.md:9", "README.md:46", "docs/import-hook.md:17"}
    assert any(b.path.name == "README.md" and files_of(b) for b in RUN_BLOCKS)


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=Block.name)
def test_every_python_block_is_marked_and_is_python(block):
    assert block.marker in MARKERS[:3] or (block.kind() == "file" and len(block.marker.split()) == 2), (
        f"{block.name()}: a ```python block says what the tests do with it: ```python run, gpu, fragment or "
        "file PATH (docs/README.md)"
    )
    compile(block.text, block.name(), "exec")
    if block.marker == "gpu":
        assert not jit_kernels(block.text), f"{block.name()}: a gpu block with kernels: make it a run block"


@pytest.mark.parametrize("block", RUN_BLOCKS, ids=Block.name)
def test_run_block_runs_as_written(block, tmp_path):
    script = tmp_path / f"{block.path.stem}_{block.line}.py"
    script.write_text(block.text)
    for file in files_of(block):
        path = tmp_path / file.marker.split()[1]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(file.text)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {
        "TRITON_INTERPRET": "1",
        "PYTHONPATH": str(ROOT),
        "CASTPILE_CACHE_DIR": str(tmp_path / "cache"),
    }
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, f"{block.name()}:\n{proc.stdout[-2000:]}{proc.stderr[-4000:]}"


def test_every_kernel_of_a_run_block_has_a_compile():
    assert sorted(k for b in RUN_BLOCKS + FILE_BLOCKS for k in jit_kernels(b.text)) == sorted(KERNELS)


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
def test_the_run_blocks_kernels_compile_for_sm90(tmp_path, strategy):
    jobs = []
    for block in RUN_BLOCKS + FILE_BLOCKS:
        module = tmp_path / f"{block.path.stem}_{block.line}.py"
        module.write_bytes(castpile.transpile(definitions(block.text), block.name(), strategy=strategy))
        jobs += [Job(module, kernel, *KERNELS[kernel]) for kernel in jit_kernels(block.text)]
    results = compile_for_sm90(jobs, tmp_path / "sm90")
    for job in jobs:
        assert results[job.key()].ok, (job.kernel, results[job.key()].error)
