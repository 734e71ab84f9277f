"""The package's import graph: front ends on the compiler, never the reverse; compiler and GPU runtime apart.

Read from the source of every module (each import statement, at any depth,
``TYPE_CHECKING`` blocks excepted): no module imports ``castpile`` itself (its
``__init__``) except the deprecated aliases, the compiler imports only itself and
``castpile.options``, and the GPU runtime only itself.  The front ends (the command line,
``castpile run``, ``@castpile.jit``, the import hook, the snapshot helper and its pytest plugin)
are one layer over the pieces they share (the cache, the output files, the options), and no
modules import each other, through any chain, type-checking imports and imports inside
functions included.  docs/README.md indexes every file of docs/data.
"""

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "castpile"
DOCS = PACKAGE.parent / "docs"


def module_name(path: Path) -> str:
    """``castpile/cli.py`` -> ``castpile.cli``; a package's ``__init__.py`` -> the package's name."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, type_checking: bool = False) -> set[str]:
    """The castpile modules ``path`` imports, as absolute dotted names (a package by its own name); with
    ``type_checking``, those of its ``TYPE_CHECKING`` blocks too."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = set()
    tree = ast.parse(path.read_text())
    skipped = {
        id(n)
        for node in ast.walk(tree)
        if not type_checking and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
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


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}
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


FRONT_ENDS = {f"castpile.{m}" for m in ("__main__", "cli", "runner", "jit", "hook", "testing", "pytest_plugin")}
SHARED = {f"castpile.{m}" for m in ("cache", "files", "options", "plain_args", "early", "reporting", "tracebacks")}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of ``graph`` that hold a cycle (more than one module, or a module that
    imports itself), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for succ in sorted(graph[node]):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph[node]:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def import_graph() -> dict[str, set[str]]:
    """Each castpile module -> the castpile modules it imports, type-checking imports included (a name imported
    from a package that is no module of it counts as the package)."""
    return {m: {i for i in imports(p, type_checking=True) if i in MODULES and i != m} for m, p in MODULES.items()}


def test_the_cycle_finder_finds_cycles():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}) == [["a", "b", "c"], ["e"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_the_front_ends_stand_over_the_pieces_they_share():
    assert set(MODULES) >= FRONT_ENDS | SHARED
    graph = import_graph()
    for name in SHARED:
        assert graph[name] & FRONT_ENDS == set(), name
    for name in FRONT_ENDS - {"castpile.__main__", "castpile.cli"}:
        assert {"castpile.cli", "castpile.__main__"} & graph[name] == set(), name


def indexed_data_files(index: str) -> set[str]:
    """The file names that the table of docs/README.md's section on docs/data lists in its first column."""
    section = index.split("## Data: `data/`", 1)[1]
    names = set()
    for row in re.findall(r"^\| (.+?) \|", section, re.M):
        names |= {name.strip() for name in row.split(",")}
    return names


def test_the_index_finder_reads_the_table():
    table = "## Data: `data/`\n\n| file | made by |\n| --- | --- |\n| a.json, b.txt | x |\n| c.png | y |\n"
    assert indexed_data_files(table) >= {"a.json", "b.txt", "c.png"}


def test_docs_readme_indexes_every_data_file():
    listed = indexed_data_files((DOCS / "README.md").read_text())
    present = {p.name for p in (DOCS / "data").iterdir() if p.is_file()}
    assert sorted(present - listed) == [], "files of docs/data that docs/README.md does not index"
    assert sorted(listed - present - {"file", "---"}) == [], "files docs/README.md indexes that docs/data lacks"
