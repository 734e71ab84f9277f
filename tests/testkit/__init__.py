"""The test kit: code shared by several test files, which import it from here and never from each other.

This module holds what any test may need (importing a file, transpiling kernels, address tables, a two-rank
ordering check); the submodules hold one concern each: ``cli`` (the command line tests' inputs), ``debug_waits``
(debug-mode waits' kernels and a clock that makes them give up), ``diagnostics``
(diagnostics by id and parameters), ``flags`` (kernels and checks for wait's cmp=/reset=None and signal's op="add"),
``hook`` (the import hook tests' kernel package and fixtures), ``jit`` (``@castpile.jit``'s notebook cells and
scripts), ``lowering`` (the lowering cases' kernel and checks), ``notebook`` (notebooks executed by nbclient on an
ipykernel), ``moe`` (the MoE dispatch reference), ``references``
(the semantic tests' inputs and torch references), ``remote`` (remote="nvshmem" kernels and tables, one forked rank),
``run`` (``castpile run``'s script and module), ``signal_wait`` (signal/wait kernels and their checks), ``v11`` (the
language v1.1 kernels, transpiled per strategy).
"""

import importlib.util
import time
from pathlib import Path

import torch

from castpile.gpu import sim


def import_file(path: Path, name: str | None = None):
    """Import the Python file ``path`` as a fresh module (Triton reads a kernel's source from its file)."""
    spec = importlib.util.spec_from_file_location(name or Path(path).stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def transpiled_module(kernels: Path, strategy: str, directory: Path):
    """The kernels file ``kernels`` transpiled under ``strategy`` into ``directory``, imported."""
    import castpile

    out = directory / f"{kernels.stem}_{strategy}.py"
    out.write_bytes(castpile.transpile(kernels.read_bytes(), str(kernels), strategy=strategy))
    return import_file(out)


def transpiled(
    directory: Path, source: str, name: str, broken: tuple[str, str, str] | None = None, *, strategy: str = "loop"
):
    """``source`` transpiled under ``strategy`` into ``directory / name``.py, imported; ``broken`` = (helper, old, new)
    replaces ``old`` by ``new`` inside that helper first (a test that the checks catch a broken helper)."""
    import castpile

    text = castpile.transpile(source.encode(), f"{name}.py", strategy=strategy).decode()
    if broken is not None:
        helper, old, new = broken
        start = text.index(f"\ndef {helper}(")
        end = text.find("\n@", start)
        assert old in text[start:end], f"{helper} no longer holds {old!r}: update the test's breakage"
        text = text[:start] + text[start:end].replace(old, new, 1) + text[end:]
    path = directory / f"{name}.py"
    path.write_text(text)
    return import_file(path, name)


def padded(w: int) -> int:
    """``w`` rounded up to a power of two: the stack dim P of a table slice of ``w`` buffers."""
    return 1 << (w - 1).bit_length()


def address_table(bufs) -> torch.Tensor:
    """The int64 table of the buffers' addresses (what a kernel's ``table[:W]`` slices)."""
    return torch.tensor([b.data_ptr() for b in bufs], dtype=torch.int64)


def rank1_after_rank0(handles, inputs, collective, reference, barrier: bool, give_up_s: float = 2.0) -> list[bool]:
    """Two simulated ranks where rank 1 writes its input only once rank 0 has returned; which ranks came out exact.

    ``collective(symm, barrier=barrier)`` runs on each rank after it has written its
    input; ``reference(inputs, rank)`` is the exact result.  The buffers start as NaN.
    The order is forced by a shared flag, not by sleeps: without a barrier rank 0
    returns having read rank 1's stale (NaN) buffer.  With one, rank 0 cannot return
    first, so rank 1 stops waiting after ``give_up_s`` seconds and writes; whenever
    that happens, a working barrier makes both results exact.
    """
    rank0_done = sim.shared_empty((1,), torch.int32).zero_()
    for h in handles:
        h.tensor.fill_(float("nan"))

    def body(rank):
        give_up = time.monotonic() + (give_up_s if barrier else float("inf"))
        while rank == 1 and not rank0_done.item() and time.monotonic() < give_up:
            time.sleep(0.01)
        handles[rank].tensor.copy_(inputs[rank])
        out = collective(handles[rank], barrier=barrier)
        rank0_done.fill_(1)
        return out

    # Without the barrier the ranks race by design: the race checker (CASTPILE_SIM_RACES=1) would refuse the run.
    outs = sim.run(body, 2, timeout=60, races=None if barrier else False)
    return [torch.equal(outs[r], reference(inputs, r)) for r in range(2)]
