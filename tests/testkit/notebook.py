"""Real notebooks for the tests: cells executed by nbclient on an ipykernel, as Jupyter runs them.

:func:`run_cells` builds a notebook of code cells, executes it in a fresh kernel of this interpreter (castpile from
the tree, ``TRITON_INTERPRET=1``, the cache in a directory of the test's), and returns each cell's outputs as text
(streams, results, and an error's name, value and traceback).  A machine where the kernel cannot start skips the
test, saying why.
"""

import os
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def run_cells(cells: list[str], cache_dir: Path, *, cwd: Path | None = None, timeout: int = 300) -> list[str]:
    """Execute ``cells`` in order in one kernel; each cell's outputs as one text (ANSI colours removed)."""
    nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed (the test extra pins it)")
    nbclient = pytest.importorskip("nbclient", reason="nbclient is not installed (the test extra pins it)")
    pytest.importorskip("ipykernel", reason="ipykernel is not installed (the test extra pins it)")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    env = {**os.environ, "TRITON_INTERPRET": "1", "CASTPILE_CACHE_DIR": str(cache_dir), "PYTHONPATH": str(REPO)}
    # the kernel spec's `python` is this interpreter
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    client = nbclient.NotebookClient(
        notebook,
        kernel_name="python3",
        timeout=timeout,
        allow_errors=True,
        resources={"metadata": {"path": str(cwd or cache_dir.parent)}},
    )
    try:
        with _environment(env):
            client.execute()
    except (RuntimeError, TimeoutError) as exc:  # nbclient's "Kernel died before replying" and the like
        if "Kernel" in str(exc) and not any(c.get("outputs") for c in notebook.cells):
            pytest.skip(f"an ipykernel cannot start on this machine: {exc}")
        raise
    return [_text(cell.outputs) for cell in notebook.cells]


class _environment:
    """``os.environ`` set to ``env`` for the ``with`` block (the kernel inherits the launching process's)."""

    def __init__(self, env: dict[str, str]):
        self.env = env

    def __enter__(self):
        self.saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(self.env)

    def __exit__(self, *exc):
        os.environ.clear()
        os.environ.update(self.saved)


def _text(outputs) -> str:
    parts = []
    for output in outputs:
        if output.output_type == "stream":
            parts.append(output.text)
        elif output.output_type == "error":
            parts.append(f"{output.ename}: {output.evalue}\n" + "\n".join(output.traceback) + "\n")
        elif "data" in output:
            parts.append(output.data.get("text/plain", "") + "\n")
    return _ANSI.sub("", "".join(parts))
