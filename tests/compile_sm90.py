"""The tests' one way to compile kernels for sm_90 (a cubin and its PTX), on the CPU.

``TRITON_INTERPRET=1`` (which the test suite sets) turns ``@triton.jit`` into an
interpreter object that cannot compile, so compiles run in child processes without it.
A test describes each compile as a :class:`Job` and calls :func:`compile_for_sm90`::

    from compile_sm90 import Job, compile_for_sm90

    results = compile_for_sm90([Job(path, "kernel", {"x": "*fp32", "B": "constexpr"}, {"B": 64})], tmp_path)
    assert results["kernel"].ok, results["kernel"].error
    ptx = results["kernel"].ptx.read_text()

In the child, :func:`compile_jobs` is the driver: it imports each job's module (a file
path or a module name), compiles the kernel for ``GPUTarget("cuda", 90, 32)``, requires
a non-empty cubin, and writes the PTX to ``<out_dir>/<n>.ptx``.  A job marked ``nvshmem``
(a module with ``remote=`` bindings) compiles with torch's NVSHMEM device functions up to
linking: without ``libnvshmem_device.bc`` on this CPU machine ptxas stops at the first
NVSHMEM symbol, and that alone counts as a success (with no PTX).  It runs as

    python tests/compile_sm90.py JOBS.json OUT_DIR RESULTS.json
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
#: What ptxas says when it stops at the first NVSHMEM symbol (Triton 3.9 assembles sm_90 with ptxas-blackwell).
NVSHMEM_UNRESOLVED = re.compile(r"ptxas(-blackwell)? fatal\s*: Unresolved extern function 'nvshmem")


@dataclass
class Job:
    """One kernel to compile.

    ``module``: a Python file (its path) or an importable module name; ``kernel``: its name
    there, or ``factory()`` for the kernel a module-level function returns; ``signature``: every
    parameter's Triton type (``"*fp32"``, ``"i32"``, ...) or ``"constexpr"`` (see
    :func:`signature`); ``constexprs``:
    the constexpr values; ``attrs``: per parameter index, Triton's specialisation attributes
    (``{0: [["tt.divisibility", 16]]}`` is what the JIT records for a pointer divisible by
    16); ``name``: the key of the result (default: the kernel's name); ``nvshmem``: the module
    calls NVSHMEM (``remote=`` bindings), compile up to linking; ``options``: Triton's compile
    options (``{"num_warps": 8, "num_stages": 3}``; Triton's defaults where left out).
    """

    module: str | Path
    kernel: str
    signature: dict[str, str]
    constexprs: dict = field(default_factory=dict)
    attrs: dict[int, list] = field(default_factory=dict)
    name: str | None = None
    nvshmem: bool = False
    options: dict = field(default_factory=dict)

    def key(self) -> str:
        return self.name or self.kernel


@dataclass
class Result:
    """What became of one job: ``ok`` with the path of its PTX (``None`` for an ``nvshmem`` job), or the error."""

    ok: bool
    error: str | None = None
    ptx: Path | None = None


def compile_for_sm90(jobs: list[Job], workdir: Path, processes: int = 1, timeout: int = 600) -> dict[str, Result]:
    """Compile ``jobs`` in ``processes`` children side by side; each job's :class:`Result` by its name.

    The children share a fresh Triton cache under ``workdir``; PTX files go to
    ``workdir/ptx``.  A child that dies fails the calling test with its output.
    """
    keys = [job.key() for job in jobs]
    assert len(set(keys)) == len(keys), f"job names must be unique: {keys}"
    workdir = Path(workdir)
    out_dir = workdir / "ptx"
    out_dir.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(workdir / "triton-cache")
    children = []
    count = max(1, min(processes, len(jobs)))
    for c in range(count):  # consecutive jobs (of one module, often) go to the same child
        chunk = [(k, job) for k, job in enumerate(jobs) if k * count // max(len(jobs), 1) == c]
        spec = workdir / f"sm90-jobs-{c}.json"
        spec.write_text(json.dumps([_as_json(k, job) for k, job in chunk]))
        found = workdir / f"sm90-results-{c}.json"
        cmd = [sys.executable, str(HERE / "compile_sm90.py"), str(spec), str(out_dir), str(found)]
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        children.append((proc, found))
    results: dict[str, Result] = {}
    for proc, found in children:
        output, _ = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, f"the sm_90 compile driver failed:\n{output[-5000:]}"
        for item in json.loads(found.read_text()):
            ptx = Path(item["ptx"]) if item["ptx"] else None
            results[item["name"]] = Result(item["ok"], item["error"], ptx)
    assert sorted(results) == sorted(keys), "the driver left jobs out"
    return results


def ptxas_for_sm90() -> str:
    """The ptxas Triton assembles sm_90 code with: ptxas-blackwell from Triton 3.9 on (the PTX it writes is too new
    for the older ptxas it also ships), ptxas before."""
    import inspect

    from triton.backends.nvidia.compiler import get_ptxas

    takes_arch = bool(inspect.signature(get_ptxas).parameters)  # Triton 3.5's get_ptxas() takes no architecture
    return (get_ptxas(90) if takes_arch else get_ptxas()).path


def signature(source: str, kernel: str, types: dict[str, str], default: str = "i32") -> dict[str, str]:
    """The signature of the function ``kernel`` of ``source`` (at any depth): ``"constexpr"`` for a parameter
    annotated ``tl.constexpr``, else its type in ``types``, else ``default``."""
    import ast

    [fn] = [node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.FunctionDef) and node.name == kernel]
    constexpr = {
        a.arg for a in fn.args.args if a.annotation is not None and ast.unparse(a.annotation).endswith("constexpr")
    }
    return {a.arg: "constexpr" if a.arg in constexpr else types.get(a.arg, default) for a in fn.args.args}


def _as_json(k: int, job: Job) -> dict:
    item = asdict(job)
    item.update(module=str(job.module), name=job.key(), index=k, attrs={str(i): v for i, v in job.attrs.items()})
    return item


# -- the driver (in the child, without TRITON_INTERPRET) -------------------------------------------


def compile_jobs(jobs: list[dict], out_dir: Path) -> list[dict]:
    """Compile each job (a :class:`Job` as JSON) for sm_90: ``{name, ok, error, ptx}`` per job."""
    import importlib
    import importlib.util
    import traceback

    assert not os.environ.get("TRITON_INTERPRET"), "compile for sm_90 without TRITON_INTERPRET"
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.runtime.errors import PTXASError

    modules: dict[str, object] = {}
    if any(job["nvshmem"] for job in jobs):
        import torch.utils._triton

        torch.utils._triton.has_triton = lambda: True  # a CPU torch leaves _nvshmem_triton's device functions out

    def load(module: str, nvshmem: bool):
        if module not in modules:
            if nvshmem:  # requires_nvshmem, which wraps remote kernels, needs the device library: unwrapped
                text = re.sub(r"^(\w+) = _castpile\d*_remote_kernel\(\1\)$", "", Path(module).read_text(), flags=re.M)
                module_copy = Path(out_dir) / f"nvshmem_{len(modules)}_{Path(module).name}"
                module_copy.write_text(text)
                modules[module] = load(str(module_copy), False)
            elif module.endswith(".py"):
                spec = importlib.util.spec_from_file_location(f"sm90_job_{len(modules)}_{Path(module).stem}", module)
                loaded = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(loaded)
                modules[module] = loaded
            else:
                modules[module] = importlib.import_module(module)
        return modules[module]

    results = []
    for job in jobs:
        try:
            fn = getattr(load(job["module"], job["nvshmem"]), job["kernel"].removesuffix("()"))
            if job["kernel"].endswith("()"):
                fn = fn()
            attrs = {(int(i),): v for i, v in job["attrs"].items()}
            source = ASTSource(fn, job["signature"], job["constexprs"], attrs)
            try:
                kernel = triton.compile(source, target=GPUTarget("cuda", 90, 32), options=job["options"] or None)
            except PTXASError as error:
                if job["nvshmem"] and NVSHMEM_UNRESOLVED.search(str(error)):
                    results.append({"name": job["name"], "ok": True, "error": None, "ptx": None})
                    continue
                raise
            assert kernel.asm["cubin"], "no cubin"
            ptx = Path(out_dir) / f"{job['index']}-{job['kernel'].removesuffix('()')}.ptx"
            ptx.write_text(kernel.asm["ptx"])
            results.append({"name": job["name"], "ok": True, "error": None, "ptx": str(ptx)})
        except Exception as error:  # reported to the test, which fails on it
            report = f"{_summary(error)}\n\n{traceback.format_exc()[-1500:]}"
            results.append({"name": job["name"], "ok": False, "error": report, "ptx": None})
    return results


def _summary(error: BaseException) -> str:
    """A compile error in a few lines: each jit function's offending line, from the kernel inwards, and the cause.

    Triton chains one ``CompilationError`` per call level; each shows the function's
    text with a caret under the position, after ``at LINE:COL:``.
    """
    lines = []
    while error.__cause__ is not None:
        text = str(error).splitlines()
        carets = [n for n, line in enumerate(text) if line.strip() == "^"]
        if text and text[0].startswith("at ") and carets and carets[0] > 0:
            where = next((line.strip() for line in text if line.lstrip().startswith("def ")), "")
            lines.append(f"{text[0]} {where[:60]} | {text[carets[0] - 1].strip()}")
        error = error.__cause__
    lines.append(f"{type(error).__name__}: {error}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    jobs_file, out_dir, results_file = argv
    results = compile_jobs(json.loads(Path(jobs_file).read_text()), Path(out_dir))
    Path(results_file).write_text(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
