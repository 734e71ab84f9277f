"""The forms the interpreter runs are the forms the GPU compiler takes: every kernel file that a CPU test runs in
the Triton interpreter is listed in :data:`INTERPRETED` with the test module that compiles it for sm_90 (the sm90
tier, tests/compile_sm90.py), and every kernel of it is named there.

The interpreter runs each scalar as a NumPy array and accepts what Triton's compiler refuses, so a form that only
the interpreter takes passes every CPU test unless something compiles it.  :func:`kernel_files` finds the kernel
files the tests reach (``tests/kernels_*.py``, ``samples/*.py`` and any other file of ``tests/``, ``samples/`` or
``benchmarks/kernels/`` with a ``@triton.jit`` function that a test module names); a new one fails
``test_every_kernel_file_a_test_runs_is_listed`` until it is listed here with its compiling module, and a kernel
added to a listed file fails ``test_every_kernel_of_a_listed_file_is_named_where_it_is_compiled`` until that
module names it (the jobs of tests/compile_sm90.py name kernels by string: ``Job(module, "kernel", ...)``).
A jit function that another calls compiles through its caller; a kernel a module-level function defines or
returns is named ``factory()``.  Generated kernels (the fuzzer's, the lowering cases') have their own sm_90 share in their
modules.
"""

import ast
import re
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

INTERPRETED = {
    # kernel file (from the repository root) -> the test module that compiles each of its kernels for sm_90
    "tests/kernels_binding_time.py": "test_binding_time",
    "tests/kernels_jit.py": "test_jit",
    "tests/kernels_reductions.py": "test_reductions",
    "tests/kernels_reductions_v13.py": "test_compile_sm90",
    "tests/kernels_scalar_forms.py": "test_scalar_forms",
    "tests/kernels_semantics.py": "test_compile_sm90",
    "tests/kernels_v11.py": "test_compile_sm90",
    "tests/kernels_v12_params.py": "test_compile_sm90",
    "tests/kernels_v12_params_remote.py": "test_language_v12_params",
    "tests/kernels_v12_peers.py": "test_language_v12_peers",
    "tests/kernels_v13_sync.py": "test_language_v13_sync",
    "tests/kernels_races.py": "test_races",
    **{f"samples/{p.name}": "test_samples_compile" for p in sorted((ROOT / "samples").glob("*.py"))},
    "benchmarks/kernels/stack_kernels.py": "test_compile_sm90",
    "benchmarks/kernels/hand_kernels.py": "test_compile_sm90",
    "benchmarks/kernels/hang_kernels.py": "test_debug_waits",  # compiled as transpiled in debug mode, generated/
    "benchmarks/kernels/generated/hang_kernels_debug_waits.py": "test_debug_waits",
    "benchmarks/kernels/generated/nvshmem_kernels_loop.py": "test_remote_modules",
    "benchmarks/kernels/own_kernels.py": "test_launch_gate",
    "benchmarks/kernels/hand_row_bodies.py": "test_index_rule",  # compiled, not interpreted: PTX against castpile's
    "benchmarks/kernels/row_bodies.py": "test_index_rule",  # compiled as generated/, and its idioms transpiled there
    "benchmarks/kernels/generated/row_bodies_loop.py": "test_index_rule",
    "benchmarks/kernels/generated/row_bodies_gather.py": "test_index_rule",
    "benchmarks/kernels/column_blocks.py": "test_index_rule",  # compiled, not interpreted: PTX against the twins'
    "benchmarks/kernels/masked_rows.py": "test_index_rule",
}
REFERENCED = re.compile(r"""["']([\w/.-]+\.py)["']""")
REACHED = ("tests", "samples", "benchmarks/kernels")
"""Where the kernel files a test names may be: a name is looked up from the repository root, and in each of these."""


def _is_jit(decorator: ast.expr) -> bool:
    return ast.unparse(decorator).split("(")[0].endswith("jit")


def kernels(path: Path) -> set[str]:
    """The kernels of a file as a compile job names them: each module-level ``@triton.jit`` function that no jit
    function of the file calls (those that are called compile through their callers), and ``factory()`` for a
    module-level function that defines one."""
    tree = ast.parse(path.read_text())
    jit = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and any(map(_is_jit, n.decorator_list))]
    called = {c.func.id for f in jit for c in ast.walk(f) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}
    found = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any(map(_is_jit, node.decorator_list)):
            found |= set() if node.name in called else {node.name}
        elif isinstance(node, ast.FunctionDef) and any(inner in jit for inner in ast.walk(node)):
            found.add(f"{node.name}()")
    return found


def kernel_files(root: Path = ROOT) -> set[str]:
    """Every kernel file the tests of ``root`` reach, relative to ``root``."""
    tests = root / "tests"
    found = {str(p.relative_to(root)) for p in tests.glob("kernels_*.py")}
    found |= {str(p.relative_to(root)) for p in (root / "samples").glob("*.py") if kernels(p)}
    for test in [*tests.glob("test_*.py"), *(tests / "testkit").glob("*.py")]:
        for name in REFERENCED.findall(test.read_text()):
            for where in (root / name, *(root / folder / name for folder in REACHED)):
                inside = root.resolve() in where.resolve().parents
                if inside and where.is_file() and where.resolve().name != Path(__file__).name:
                    rel = str(where.resolve().relative_to(root.resolve()))
                    if rel.startswith(tuple(f"{folder}/" for folder in REACHED)) and kernels(where):
                        found.add(rel)
    return found


def uncompiled(kernel_file: Path, compiling_module: Path) -> list[str]:
    """The kernels of ``kernel_file`` that ``compiling_module`` does not name (all of them if it compiles nothing
    for sm_90 or does not name the file)."""
    text = compiling_module.read_text()
    if "compile_for_sm90(" not in text or kernel_file.stem not in text:
        return sorted(kernels(kernel_file))
    literals = {n.value for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    factories = {  # a module-level function a job calls for its kernel (``sum_plus_one_kernel()``): what it names
        f"{n.name}()": {m.id for m in ast.walk(n) if isinstance(m, ast.Name)}
        for n in ast.parse(kernel_file.read_text()).body
        if isinstance(n, ast.FunctionDef) and not any(map(_is_jit, n.decorator_list))
    }
    named = literals | {k for f, names in factories.items() if f in literals for k in names}
    return sorted(kernels(kernel_file) - named)


def test_every_kernel_file_a_test_runs_is_listed():
    missing = sorted(kernel_files() - INTERPRETED.keys())
    assert not missing, f"kernel files a test runs in the interpreter with no sm_90 compile listed: {missing}"


@pytest.mark.parametrize("filename", sorted(INTERPRETED))
def test_every_kernel_of_a_listed_file_is_named_where_it_is_compiled(filename):
    module = HERE / f"{INTERPRETED[filename]}.py"
    missing = uncompiled(ROOT / filename, module)
    assert not missing, f"{filename}: kernels that {module.name} does not compile for sm_90: {missing}"


KERNEL = "import triton\n\n\n@triton.jit\ndef {name}(x):\n    pass\n"


def test_an_interpreter_only_kernel_file_or_kernel_fails(tmp_path):
    """The checks are not vacuous: a new kernel file that a test runs, by any name, is found and is not listed (a
    benchmark's kernels that a test names among them, by its path or its name); a kernel added to a file whose
    compiling module does not name it is reported."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "benchmarks" / "kernels").mkdir(parents=True)
    (tmp_path / "tests" / "kernels_new.py").write_text(KERNEL.format(name="fresh"))
    (tmp_path / "tests" / "other_forms.py").write_text(KERNEL.format(name="other"))
    for name in ("bench_named", "bench_by_path", "bench_unused"):
        (tmp_path / "benchmarks" / "kernels" / f"{name}.py").write_text(KERNEL.format(name=name))
    (tmp_path / "tests" / "test_new.py").write_text(
        'KERNELS = Path(__file__).with_name("other_forms.py")\n'
        'BENCH = ROOT / "benchmarks" / "kernels" / "bench_named.py"\n'
        'OTHER = ROOT / "benchmarks/kernels/bench_by_path.py"\n'
    )
    found = kernel_files(tmp_path)
    benchmarks = {"benchmarks/kernels/bench_named.py", "benchmarks/kernels/bench_by_path.py"}
    assert found == {"tests/kernels_new.py", "tests/other_forms.py", *benchmarks} and not found & INTERPRETED.keys()
    compiling = tmp_path / "tests" / "test_compiles.py"
    call = "compile_for_sm90" + '([Job(HERE / "kernels_new.py", "fresh", {})], tmp_path)\n'  # split: no sm90 tier here
    compiling.write_text(call)
    assert uncompiled(tmp_path / "tests" / "kernels_new.py", compiling) == []
    (tmp_path / "tests" / "kernels_new.py").write_text(KERNEL.format(name="fresh") + KERNEL.format(name="added")[15:])
    assert uncompiled(tmp_path / "tests" / "kernels_new.py", compiling) == ["added"]
