"""A simulated run that times out says where each hung rank waits: the path:line of the castpile.wait in the user's source.

The kernels are tests/testkit/signal_wait.py's (compiled for sm_90 in tests/test_signal_wait.py);
the expected lines are found in that source text by hand, never taken from castpile's output.
"""

import sys
import time
from pathlib import Path

import pytest
import torch

import castpile
from castpile.gpu import sim
from testkit.signal_wait import KERNELS, kernels

WAIT_LINE = "cp.wait(pad + peer + tl.arange(0, 1))"  # wait_rounds' wait
TIMEOUT = 10.0  # long enough for a rank on a loaded 2-core machine to reach its wait before time runs out


def line_of(source: str, text: str) -> int:
    """The 1-based number of the one line of ``source`` that is ``text`` (leading and trailing blanks aside)."""
    [number] = [i for i, line in enumerate(source.splitlines(), 1) if line.strip() == text]
    return number


def _waiting_for_rank_1(k, world: int):
    """Every rank but 1 waits for flag 1 on its own pad; rank 1 never raises it.

    A first run with every flag already raised returns at once: it pays the interpreter's first call of the kernel,
    which on a loaded machine took a rank past the timeout before it reached its wait (a clean-clone CI run found
    rank 0 still inside the interpreter's set-up at 10 s).
    """
    handles = sim.symmetric_empty(world, (4,), torch.float32)

    def body(rank):
        if rank != 1:
            k.wait_rounds[(1,)](handles[rank].signal_pad, 1, 1)

    waiting = [handles[rank] for rank in range(world) if rank != 1]
    for handle in waiting:
        handle.signal_pad[1] = 1
    sim.run(body, world, timeout=120)
    assert not any(handle.signal_pad.any() for handle in waiting)  # every wait lowered its flag again
    with pytest.raises(sim.RankTimeout) as info:
        sim.run(body, world, timeout=TIMEOUT)
    return info.value


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
def test_the_timeout_names_each_waiting_ranks_wait_in_the_transpiled_file(tmp_path, strategy):
    error = _waiting_for_rank_1(kernels(strategy, tmp_path), 3)
    site = f"{tmp_path / f'signal_wait_kernels_{strategy}.py'}:{line_of(KERNELS, WAIT_LINE)}"
    assert error.hung == [0, 2]
    for rank in (0, 2):
        # The wait's line, then what it waits for and saw.
        assert error.sites[rank].startswith(
            f"spins in castpile.wait at {site} (kernel wait_rounds): waits for flag eq 1; saw [0]"
        )
        assert f"rank {rank} spins in castpile.wait at {site}" in str(error)
    assert error.deadlock and f"killed before the {TIMEOUT:g} s timeout" in str(error)


def test_the_timeout_names_the_users_file_not_the_hooks_cache_entry(tmp_path, monkeypatch):
    package = tmp_path / "hungkernels"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "waits.py").write_text(KERNELS)
    monkeypatch.syspath_prepend(str(tmp_path))
    with castpile.install_import_hook("hungkernels", cache_dir=tmp_path / "cache"):
        import hungkernels.waits as k
    try:
        error = _waiting_for_rank_1(k, 2)
    finally:
        for name in ("hungkernels", "hungkernels.waits"):
            sys.modules.pop(name, None)
    assert error.hung == [0]
    assert error.sites[0].startswith(
        f"spins in castpile.wait at {package / 'waits.py'}:{line_of(KERNELS, WAIT_LINE)} (kernel wait_rounds): "
    )
    assert "cache" not in error.sites[0]


def test_a_rank_hung_outside_castpile_is_placed_in_its_own_code():
    def body(rank):
        while rank == 1:
            time.sleep(0.01)

    with pytest.raises(sim.RankTimeout) as info:
        sim.run(body, 2, timeout=1.5)
    source = Path(__file__).read_text()
    lines = {line_of(source, "while rank == 1:"), line_of(source, "time.sleep(0.01)")}
    assert info.value.hung == [1]
    assert any(info.value.sites[1] == f"was at {__file__}:{n} (in body), in no castpile wait" for n in lines), (
        info.value.sites
    )
