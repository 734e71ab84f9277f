"""The package's import graph: front ends on the compiler, never the reverse; compiler and GPU runtime apart.

Read from the source of every module (each import statement, at any depth,
``TYPE_CHECKING`` blocks excepted): no module imports ``castpile`` itself (its
``__init__``) except the deprecated aliases, the compiler imports only itself and
``castpile.options``, and the GPU runtime only itself.
"""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "castpile"


def imports(path: Path) -> set[str]:
    """The castpile modules ``path`` imports, as absolute dotted names."""
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = set()
    tree = ast.parse(path.read_text())
    skipped = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for n in ast.walk(node)
    }
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "castpile"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "castpile":
                continue
            names = [f"{target}.{a.name}" for a in node.names]
            found |= {
                n
                for n in names
                if (PACKAGE.parent / n.replace(".", "/")).with_suffix(".py").exists()
                or (PACKAGE.parent / n.replace(".", "/")).is_dir()
            } or {target}
    return found


MODULES = {".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts): p for p in PACKAGE.rglob("*.py")}
DEPRECATED = {f"castpile.{m}" for m in ("runtime", "sim", "launch", "collectives")}


def test_the_layout():
    assert {"castpile.compiler.pipeline", "castpile.gpu.runtime", "castpile.cli", "castpile.options"} <= set(MODULES)


def test_nothing_imports_castpile_init():
    offenders = {m: sorted(i for i in imports(p) if i == "castpile") for m, p in MODULES.items()}
    assert {m: i for m, i in offenders.items() if i} == {}


# castpile.compiler.helpers is the code transpiled modules carry, never imported by the rest of the compiler (emit
# reads its family modules as text): a module with remote="nvshmem" kernels runs the simulator's NVSHMEM
# stand-ins under TRITON_INTERPRET=1, and one transpiled with debug-mode waits writes to their record.
HELPERS = "castpile.compiler.helpers"
OUTPUT_CODE_IMPORTS = {
    f"{HELPERS}.remote": {"castpile.gpu.sim_nvshmem"},
    f"{HELPERS}.deadlines": {"castpile.gpu.wait_deadlines"},
}


def test_compiler_imports_only_itself_and_options():
    for name, path in MODULES.items():
        if name.startswith("castpile.compiler"):
            outside = {i for i in imports(path) if not i.startswith("castpile.compiler") and i != "castpile.options"}
            assert outside == OUTPUT_CODE_IMPORTS.get(name, set()), name


def test_the_compiler_never_imports_its_helpers():
    for name, path in MODULES.items():
        if name.startswith("castpile.compiler") and not name.startswith(HELPERS):
            assert not any(i == HELPERS or i.startswith(f"{HELPERS}.") for i in imports(path)), name


def test_gpu_runtime_imports_only_itself():
    for name, path in MODULES.items():
        if name.startswith("castpile.gpu"):
            outside = {i for i in imports(path) if not i.startswith("castpile.gpu")}
            assert outside == set(), name


def test_only_front_ends_and_aliases_import_across():
    for name, path in MODULES.items():
        if name.startswith(("castpile.compiler", "castpile.gpu")) or name in DEPRECATED:
            continue
        assert not any(i.startswith("castpile.gpu") for i in imports(path)), name
