"""The import hook across processes: concurrent cold imports, multiprocessing spawn and torchrun children, and
pytest's assertion rewriting next to the hook; each runs in fresh interpreters against a torch reference.
"""

import os
import subprocess
import sys
import time

from testkit.hook import REPO, entries, hook_cache_dir, hook_package  # noqa: F401 (the fixtures cache_dir and pkg)

RACER = """
import os, sys, time
sys.path.insert(0, {root!r})
import torch, triton, castpile
open(sys.argv[1], "w").close()
while not os.path.exists({go!r}):
    time.sleep(0.002)
castpile.install_import_hook({pkg!r}, cache_dir={cache!r})
from {pkg} import check
print("ok", check.check(W=4, n=11))
"""


def test_concurrent_cold_imports(pkg, cache_dir, tmp_path):
    go = tmp_path / "go"
    code = RACER.format(root=str(pkg.root), go=str(go), pkg=pkg.name, cache=str(cache_dir))
    env = {**os.environ, "PYTHONPATH": str(REPO), "TRITON_INTERPRET": "1"}
    ready = [tmp_path / f"ready{i}" for i in range(8)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(r)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for r in ready
    ]
    try:
        deadline = time.monotonic() + 180
        while not all(r.exists() for r in ready) and time.monotonic() < deadline:
            assert all(p.poll() is None for p in procs), [p.communicate() for p in procs if p.poll() is not None]
            time.sleep(0.01)
        go.touch()
        results = [p.communicate(timeout=240) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (out, err) in zip(procs, results):
        assert p.returncode == 0 and out.split() == ["ok", "4"], err
    assert len(entries(cache_dir)) == 1
    assert sorted(cache_dir.iterdir()) == entries(cache_dir)  # no temporary files left


def test_multiprocessing_spawn_children(pkg, cache_dir, monkeypatch):
    import multiprocessing

    pkg.write("__init__", "import castpile\n\ncastpile.install_import_hook(__name__)\n")
    monkeypatch.setenv("CASTPILE_CACHE_DIR", str(cache_dir))
    check = pkg.load("check").check
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        assert pool.map(check, [2, 4]) == [2, 4]
    assert len(entries(cache_dir)) == 1


def test_torchrun_children(pkg, cache_dir, tmp_path):
    pkg.write("__init__", "import castpile\n\ncastpile.install_import_hook(__name__)\n")
    script = tmp_path / "train.py"
    script.write_text(
        f"import os, sys\nsys.path.insert(0, {str(pkg.root)!r})\n"
        f"from {pkg.name} import check\n"
        "rank = int(os.environ['RANK'])\n"
        "check.check(W=2 + 2 * rank)\n"
        "os.write(1, f'rank {rank} ok\\n'.encode())  # one write: the ranks share stdout\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "TRITON_INTERPRET": "1", "CASTPILE_CACHE_DIR": str(cache_dir)}
    res = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert "rank 0 ok" in res.stdout and "rank 1 ok" in res.stdout
    assert len(entries(cache_dir)) == 1


def test_pytest_assertion_rewriting_is_undisturbed(pkg, cache_dir, tmp_path):
    pkg.write("__init__", "import castpile\n\ncastpile.install_import_hook(__name__)\n")
    test_src = (
        "import castpile\n"
        f"from {pkg.name} import check\n\n\n"
        "def test_rewritten():\n"
        "    values = [check.check(W=2)]\n"
        "    assert values == [3]\n"
    )
    pkg.write("test_inside", test_src)
    outside = tmp_path / "tests_outside"
    outside.mkdir()
    (outside / "test_outside.py").write_text(test_src)
    env = {"PYTHONPATH": os.pathsep.join([str(REPO), str(pkg.root)]), "CASTPILE_CACHE_DIR": str(cache_dir)}
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(tmp_path),
            "-q",
            str(pkg.path("test_inside")),
            str(outside / "test_outside.py"),
        ],
        env={**os.environ, **env, "TRITON_INTERPRET": "1"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    out = res.stdout
    assert "2 failed" in out, out + res.stderr
    # pytest's rewriting shows the compared values; a plain assert would not.
    assert out.count("E       assert [2] == [3]") == 2, out
    assert len(entries(cache_dir)) == 1
