"""A run-time error inside a kernel names the user's file and line, from every front end: a script's
``@castpile.jit`` kernel and a hooked package's kernel, each run by plain ``python`` (a notebook cell's:
tests/test_notebooks.py; ``castpile run``'s: tests/test_run.py).  Before, the traceback named the cache entry
(``<cache>/__main__-<hex>.py``) and showed the transpiled line."""

import os
import subprocess
import sys
import textwrap

from testkit.hook import REPO

KERNEL_BODY = """\
    bufs = castpile.multicast_like(out, dev_ptrs[:W], shape=(n,))
    offs = tl.arange(0, BLOCK)
    total = tl.sum(bufs[offs], axis=0)
    broken = total.no_such_method()
    tl.store(out + offs, total, mask=offs < n)
"""

LAUNCH = """\
a, b, out = torch.arange(16.0), torch.ones(16), torch.zeros(16)
ptrs = torch.tensor([a.data_ptr(), b.data_ptr()], dtype=torch.int64)
kern[(1,)](out, ptrs, 10, W=2, BLOCK=16)
"""


def run(path, cwd, cache):
    env = {**os.environ, "PYTHONPATH": str(REPO), "TRITON_INTERPRET": "1", "CASTPILE_CACHE_DIR": str(cache)}
    return subprocess.run([sys.executable, str(path)], cwd=cwd, env=env, capture_output=True, text=True, timeout=240)


def assert_names_the_users_line(stderr: str, path, line: int, cache) -> None:
    assert f'File "{path}", line {line}, in kern\n    broken = total.no_such_method()\n' in stderr, stderr
    assert str(cache) not in stderr and "_castpile_" not in stderr, stderr
    assert stderr.rstrip().endswith("""AttributeError("'tensor' object has no attribute 'no_such_method'")"""), stderr


def test_a_jit_kernels_error_names_the_script(tmp_path):
    script = tmp_path / "script.py"
    head = "import torch\nimport triton.language as tl\nimport castpile\n\n\n@castpile.jit\n"
    head += "def kern(out, dev_ptrs, n, W: tl.constexpr, BLOCK: tl.constexpr):\n"
    script.write_text(head + KERNEL_BODY + "\n\n" + LAUNCH)
    result = run(script, tmp_path, tmp_path / "cache")
    assert result.returncode == 1
    assert_names_the_users_line(result.stderr, script, 11, tmp_path / "cache")


def test_a_hooked_kernels_error_names_the_module(tmp_path):
    package = tmp_path / "mypkg"
    package.mkdir()
    (package / "__init__.py").write_text("import castpile\n\ncastpile.install_import_hook(__name__)\n")
    kernels = "import triton\nimport triton.language as tl\nimport castpile\n\n\n@triton.jit\n"
    kernels += "def kern(out, dev_ptrs, n, W: tl.constexpr, BLOCK: tl.constexpr):\n" + KERNEL_BODY
    (package / "kernels.py").write_text(kernels)
    main = tmp_path / "main.py"
    main.write_text("import torch\n\nfrom mypkg.kernels import kern\n\n" + textwrap.dedent(LAUNCH))
    result = run(main, tmp_path, tmp_path / "cache")
    assert result.returncode == 1
    assert_names_the_users_line(result.stderr, package / "kernels.py", 11, tmp_path / "cache")
    assert f'File "{main}", line 7, in <module>' in result.stderr  # the script's own frame as before


def test_other_errors_print_as_python_prints_them(tmp_path):
    script = tmp_path / "plain.py"
    script.write_text("import castpile\n\n\n@castpile.jit\ndef k(x):\n    pass\n\n\n1 / 0\n")
    result = run(script, tmp_path, tmp_path / "cache")
    assert result.stderr.endswith("    1 / 0\n    ~~^~~\nZeroDivisionError: division by zero\n"), result.stderr
