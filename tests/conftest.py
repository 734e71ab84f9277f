"""The suite's set-up: every test runs under the Triton interpreter, and slow tests carry tier markers.

``TRITON_INTERPRET=1`` is set here and nowhere else: pytest imports this file before any test module,
so before anything imports triton (whose ``@triton.jit`` reads the variable when a kernel is defined).
Shared test code lives in tests/testkit/; test modules import from there, never from each other.

The markers (registered in pyproject.toml) say why a test is slow; ``make test-fast`` leaves all of them
out and runs the compiler, CLI, diagnostics and lowering tests, ``make test`` runs everything:

* ``sim``: kernels in forked simulated ranks (:mod:`castpile.gpu.sim`) or the fused ops' kernels;
* ``sm90``: compiles kernels for sm_90 in child processes (tests/compile_sm90.py);
* ``subprocess``: runs fresh Python interpreters (a wheel, hostile inputs, the import hook across processes);
* ``fuzz``: generated kernels run in the interpreter, or random edits transpiled.

A test module is marked whole by :data:`MODULE_TIERS`; any other test by what its own body calls
(:data:`BODY_TIERS`) or, for compiles made through a shared function, by its name.
"""

import functools
import inspect
import os
import re
import sys

import pytest

if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
    raise pytest.UsageError(
        "triton was imported before tests/conftest.py could set TRITON_INTERPRET=1: "
        "run pytest with TRITON_INTERPRET=1, or without the plugin that imports triton"
    )
os.environ["TRITON_INTERPRET"] = "1"

MODULE_TIERS = {
    "test_collectives": "sim",
    "test_moe": "sim",
    "test_rmsnorm": "sim",
    "test_tp_gemm": "sim",
    "test_torch_ops": "sim",
    "test_torch_ops_moe": "sim",
    "test_remote": "sim",
    "test_signal_wait": "sim",
    "test_sim": "sim",
    "test_samples_run": "sim",
    "test_docs_run": "sim",
    "test_language_v12_params": "sim",
    "test_language_v12_peers": "sim",
    "test_flags": "sim",
    "test_sim_hangs": "sim",
    "test_sim_wide": "sim",
    "test_remote_modules": "sim",
    "test_remote_gpu_scripts": "sim",
    "test_hostile": "subprocess",
    "test_wheel": "subprocess",
    "test_check_one_gpu": "subprocess",
    "test_local_memory_proof": "subprocess",
    "test_hook": "subprocess",
    "test_hook_cache": "subprocess",
    "test_hook_processes": "subprocess",
    "test_notebooks": "subprocess",
    "test_tracebacks": "subprocess",
    "test_typing_user": "subprocess",
    "test_fuzz_semantics": "fuzz",
    "test_fuzz_mutation": "fuzz",
}
#: Modules whose simulated runs are race-checked (``CASTPILE_SIM_RACES=1``, docs/races.md): the library's
#: collectives and fused ops, the samples, and the suite's multi-rank kernels.  A test that races on purpose (to
#: show the numbers a missing barrier gets wrong), or that times a hang, passes ``races=False``.
RACE_CHECKED = {
    "test_collectives",
    "test_rmsnorm",
    "test_moe",
    "test_tp_gemm",
    "test_samples_run",
    "test_samples_v13",
    "test_signal_wait",
    "test_flags",
    "test_language_v12_peers",
    "test_language_v12_params",
    "test_language_v13_sync",
    "test_sim_wide",
    "test_torch_ops",
    "test_torch_ops_moe",
}
BODY_TIERS = {"compile_for_sm90(": "sm90", "sys.executable": "subprocess", "sim.run(": "sim"}
COMPILE_TEST = re.compile(r"sm90|compile_for_the_gpu|compiles_for")


@functools.cache
def body_tiers(function) -> tuple[str, ...]:
    """The markers :data:`BODY_TIERS` gives a test function (read once, however many parameters it has)."""
    body = inspect.getsource(function)
    return tuple(marker for call, marker in BODY_TIERS.items() if call in body)


def pytest_collection_modifyitems(items):
    for item in items:
        tier = MODULE_TIERS.get(item.module.__name__.rpartition(".")[2])
        if tier is not None:
            item.add_marker(tier)
        if COMPILE_TEST.search(item.name):
            item.add_marker("sm90")
        for marker in body_tiers(item.function):
            item.add_marker(marker)


@pytest.fixture(autouse=True)
def _race_checked(request, monkeypatch):
    """Turn the simulator's race checker on for the tests of :data:`RACE_CHECKED`."""
    if request.module.__name__.rpartition(".")[2] in RACE_CHECKED:
        monkeypatch.setenv("CASTPILE_SIM_RACES", "1")
