"""Debug-mode waits (CASTPILE_DEBUG_WAITS) in the interpreter and on sm_90: they wait as normal ones do, give up at
their deadline with one entry naming the user's line, and leave normal-mode output, and its PTX, without a clock.

The kernels are tests/testkit/debug_waits.py's; expected lines and values are read off that source and the tensors by
hand.  In the interpreter there is no clock, so a test that wants a wait to give up replaces the module's with one
that moves on a second at each reading.
"""

from pathlib import Path

import pytest
import torch

import castpile
from castpile.gpu import HangError, check_waits
from compile_sm90 import Job, compile_for_sm90
from testkit import address_table, import_file
from testkit.debug_waits import KERNELS, REMOTE_KERNEL, debug_kernels, line_of, ticking_clock, transpiled_file

W = 3
ROOT = Path(__file__).resolve().parents[1]


def pads() -> list[torch.Tensor]:
    return [torch.zeros(4, dtype=torch.int32) for _ in range(W)]


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
def test_in_the_interpreter_debug_waits_wait_as_normal_ones_do(tmp_path, strategy):
    k = debug_kernels(tmp_path, strategy)
    mine = pads()
    table = address_table(mine)
    mine[0][:3] = 1
    k.wait_plain[(1,)](mine[0], 3, 4)
    for r, pad in enumerate(mine):
        pad[0] = 2 + r
    k.wait_multicast[(1,)](mine[0], table, W)
    k.signal_lowered[(1,)](mine[0], table, W)
    mine[0][3] = 1
    k.wait_scalar[(1,)](mine[0], 3)
    k.signal_one_peer[(1,)](mine[0], table, 2)
    assert [pad.tolist() for pad in mine] == [[2, 1, 0, 0], [3, 1, 0, 0], [4, 1, 1, 0]]
    check_waits()  # nothing gave up


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
def test_a_wait_past_its_deadline_gives_up_and_names_its_line(tmp_path, strategy, monkeypatch):
    k = debug_kernels(tmp_path, strategy)
    monkeypatch.setattr(k, "_castpile_clock", ticking_clock)
    mine = pads()
    table = address_table(mine)
    for pad in mine:
        pad[1] = 5  # signal_lowered waits for 0
    mine[0][1] = 1  # wait_plain: flag 1 arrives, 0 and 2 never do
    mine[1][2] = 7  # signal_one_peer waits for 0
    k.wait_plain[(1,)](mine[0], 3, 4)
    k.wait_multicast[(1,)](mine[0], table, W)
    k.signal_lowered[(1,)](mine[0], table, W)
    k.wait_scalar[(1,)](mine[0], 3)
    k.signal_one_peer[(1,)](mine[0], table, 1)
    # flag 1 lowered by the wait, then raised by the signal where it was 0: the give-ups touched nothing
    assert [pad.tolist() for pad in mine] == [[0, 1, 0, 0], [0, 5, 7, 0], [0, 5, 0, 0]]
    path = f"debug_waits_{strategy}.py"
    waited = line_of(KERNELS, "cp.wait(pad + offs, mask=offs < n)")
    waited_ge = line_of(KERNELS, 'cp.wait(pads[0], 2, cmp="ge", reset=None)')
    signalled = line_of(KERNELS, "cp.signal(pads[1], wait_for=0)")
    waited_scalar = line_of(KERNELS, "cp.wait(pad + slot)")
    signalled_peer = line_of(KERNELS, "cp.signal(to_peer[2], wait_for=0)")
    lowest = min(pad.data_ptr() for pad in mine)
    lowest_raised = min(pad.data_ptr() for pad in mine[1:]) + 4  # flag 1 of rank 1's or rank 2's pad
    with pytest.raises(HangError) as info:
        check_waits()
    assert str(info.value).splitlines()[1:] == [
        (
            f"block (0, 0, 0) gave up waiting at {path}:{waited} after 2 s: flag at {mine[0].data_ptr():#x} == 1 expected, "
            "saw 0"
        ),
        f"block (0, 0, 0) gave up waiting at {path}:{waited_ge} after 2 s: flag at {lowest:#x} >= 2 expected, saw 0",
        (
            f"block (0, 0, 0) gave up signalling (wait_for=) at {path}:{signalled} after 2 s: flag at {lowest_raised:#x} == 0 "
            "expected, saw 5"
        ),
        (
            f"block (0, 0, 0) gave up waiting at {path}:{waited_scalar} after 2 s: flag at {mine[0].data_ptr() + 12:#x} == 1 "
            "expected, saw 0"
        ),
        (
            f"block (0, 0, 0) gave up signalling (wait_for=) at {path}:{signalled_peer} after 2 s: flag at "
            f"{mine[1].data_ptr() + 8:#x} == 0 expected, saw 7"
        ),
    ]
    check_waits()  # cleared: the process goes on


# -- the generated code: normal mode has no clock; debug mode reads it and writes the record ----------------------

SIGNATURES = {
    "wait_plain": ({"pad": "*i32", "n": "i32", "BLOCK": "constexpr"}, {"BLOCK": 4}),
    "wait_multicast": ({"pad": "*i32", "pad_ptrs": "*i64", "W": "constexpr"}, {"W": W}),
    "signal_lowered": ({"pad": "*i32", "pad_ptrs": "*i64", "W": "constexpr"}, {"W": W}),
    "wait_scalar": ({"pad": "*i32", "slot": "i32"}, {}),
    "signal_one_peer": ({"pad": "*i32", "pad_ptrs": "*i64", "peer": "i32"}, {}),
}


def test_normal_mode_ptx_has_no_clock_and_debug_mode_ptx_reads_it_and_writes_the_record(tmp_path):
    jobs = []
    for strategy in castpile.STRATEGIES:
        for mode, seconds in (("normal", None), ("debug", 2.0)):
            path = transpiled_file(tmp_path, KERNELS, f"{mode}_{strategy}", strategy, seconds)
            for kernel, (signature, constexprs) in SIGNATURES.items():
                jobs.append(Job(path, kernel, signature, constexprs, name=f"{mode} {strategy} {kernel}"))
            remote = transpiled_file(tmp_path, REMOTE_KERNEL, f"{mode}_remote_{strategy}", strategy, seconds)
            jobs.append(Job(remote, "wait_remote", SIGNATURES["wait_multicast"][0], {"W": W},
                            name=f"{mode} {strategy} wait_remote", nvshmem=True))  # fmt: skip
    barrier = ROOT / "benchmarks/kernels/generated/hang_kernels_debug_waits.py"  # benchmarks/debug_waits_proof.py's
    signature = {"pad": "*i32", "pad_ptrs": "*i64", "rank": "i32", "W": "constexpr"}
    jobs.append(Job(barrier, "barrier", signature, {"W": 2}, name="debug generated barrier"))
    results = compile_for_sm90(jobs, tmp_path, processes=2)
    assert {name: r.error for name, r in results.items() if not r.ok} == {}
    for name, result in results.items():
        if result.ptx is None:  # NVSHMEM's: compiled up to linking
            continue
        ptx = result.ptx.read_text()
        if name.startswith("normal"):
            assert "globaltimer" not in ptx, name
        else:
            assert "%globaltimer" in ptx, name
            assert "atom.global.sys.relaxed.add.u64" in ptx, name  # an entry claimed
            assert ptx.count("st.global.b64") >= 10, name  # and written


def test_debug_mode_changes_only_the_spinning_calls(tmp_path):
    normal = castpile.transpile(KERNELS, "k.py").decode().splitlines()
    debug = castpile.transpile(KERNELS, "k.py", debug_waits=2.0).decode().splitlines()
    spinning = {line_of(KERNELS, text) for text in ("cp.wait(pad + offs, mask=offs < n)",
                'cp.wait(pads[0], 2, cmp="ge", reset=None)', "cp.signal(pads[1], wait_for=0)",
                "cp.wait(pad + slot)", "cp.signal(to_peer[2], wait_for=0)")}  # fmt: skip
    body = KERNELS.count("\n")
    changed = {n for n, (a, b) in enumerate(zip(normal[:body], debug[:body]), 1) if a != b}
    assert changed == spinning
    assert "globaltimer" not in "\n".join(normal) and "castpile.gpu" not in "\n".join(normal)
    assert import_file(transpiled_file(tmp_path, KERNELS, "k", "loop", None)).wait_plain is not None
