"""Debug-mode waits tried as a new user would from the docs: seconds at the edges of what a deadline can hold, sites
that are cut to fit the record, and debug-mode output that says what it is.

A deadline reaches the kernel as an int64 of nanoseconds (``deadline_ns=``) and is written to the record as one: the
seconds must give at least one nanosecond and at most 2**63 - 1.  Expected texts are written here by hand.
"""

import re

import pytest
import torch

import castpile
from castpile import cli
from compile_sm90 import Job, compile_for_sm90, signature
from testkit import import_file

SOURCE = b"""\
import triton
import triton.language as tl
import castpile


@triton.jit
def waits(pad):
    castpile.wait(pad)
"""
SIGNAL_ONLY = b"""\
import triton
import castpile


@triton.jit
def signals(pad, pad_ptrs):
    pads = castpile.multicast_like(pad, pad_ptrs[:2])
    castpile.signal(pads[0])
"""
LONGEST_S = (2**63 - 1) // 10**9  # 9223372036 s: the whole seconds an int64 of nanoseconds holds


@pytest.fixture
def src(tmp_path):
    path = tmp_path / "waits.py"
    path.write_bytes(SOURCE)
    return path


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("1e300", f"is more than {LONGEST_S} seconds, the longest deadline a wait can hold"),
        ("1e11", f"is more than {LONGEST_S} seconds, the longest deadline a wait can hold"),
        ("9223372037", f"is more than {LONGEST_S} seconds, the longest deadline a wait can hold"),
        ("1e-12", "is less than a nanosecond, the shortest deadline a wait can hold"),
        ("4e-10", "is less than a nanosecond, the shortest deadline a wait can hold"),
    ],
    ids=["1e300", "1e11", "9223372037", "1e-12", "4e-10"],
)
@pytest.mark.parametrize("given_as", ["option", "variable"])
def test_seconds_a_deadline_cannot_hold_are_a_usage_error_and_nothing_is_written(src, tmp_path, monkeypatch,
                                                                                 capsysbinary, value, problem,
                                                                                 given_as):  # fmt: skip
    out = tmp_path / "out.py"
    if given_as == "option":
        argv, name, example = ["--debug-waits", value], "--debug-waits", "--debug-waits 5"
    else:
        monkeypatch.setenv("CASTPILE_DEBUG_WAITS", value)
        argv, name, example = [], "CASTPILE_DEBUG_WAITS", "CASTPILE_DEBUG_WAITS=5"
    assert cli.main([str(src), "-o", str(out), *argv]) == 2
    err = capsysbinary.readouterr().err.decode()
    assert err == (
        f"castpile: error: {name}={value!r} {problem}: give how long a castpile.wait may spin before it gives up, "
        f"as in {example}\n"
    )
    assert not out.exists()


@pytest.mark.parametrize(
    ("seconds", "problem"),
    [
        (1e300, f"is more than {LONGEST_S} seconds, the longest deadline a wait can hold"),
        (1e10, f"is more than {LONGEST_S} seconds, the longest deadline a wait can hold"),
        (1e-12, "is less than a nanosecond, the shortest deadline a wait can hold"),
        ("3", "is not a number of seconds"),
    ],
    ids=["1e300", "1e10", "1e-12", "a string"],
)
def test_castpile_transpile_refuses_seconds_a_deadline_cannot_hold(seconds, problem):
    with pytest.raises(ValueError) as info:
        castpile.transpile(SOURCE, "waits.py", debug_waits=seconds)
    assert str(info.value).startswith(f"debug_waits={seconds!r} {problem}: give the seconds a castpile.wait may spin")


def test_the_hook_refuses_seconds_a_deadline_cannot_hold(tmp_path, monkeypatch):
    monkeypatch.setenv("CASTPILE_DEBUG_WAITS", "1e300")
    with pytest.raises(ValueError, match=rf"^CASTPILE_DEBUG_WAITS='1e300' is more than {LONGEST_S} seconds"):
        castpile.install_import_hook("hooked", cache_dir=tmp_path / "cache")


def test_the_edges_of_what_a_deadline_holds_transpile_and_compile_for_sm90(tmp_path):
    jobs = []
    for name, seconds, deadline_ns in (("shortest", 1e-9, 1), ("longest", LONGEST_S, LONGEST_S * 10**9)):
        text = castpile.transpile(SOURCE, "waits.py", debug_waits=seconds).decode()
        assert f"_castpile_wait_flags_until(pad, site='waits.py:8', deadline_ns={deadline_ns})" in text
        path = tmp_path / f"{name}.py"
        path.write_text(text)
        jobs.append(Job(path, "waits", {"pad": "*i32"}, name=name))
    results = compile_for_sm90(jobs, tmp_path)
    assert {name: r.error for name, r in results.items() if not r.ok} == {}
    for result in results.values():
        assert "%globaltimer" in result.ptx.read_text()


@pytest.mark.parametrize(
    ("site", "recorded"),
    [
        ("/" + "é" * 100 + "/kk.py:7", "..." + "é" * 82 + "/kk.py:7"),  # 173 bytes of tail: half an é, then 82
        ("/" + "é" * 100 + "/k.py:7", "..." + "é" * 83 + "/k.py:7"),  # 166 bytes of é: cut between two
        ("/p/" + "😀" * 50 + ".py:10", "..." + "😀" * 41 + ".py:10"),  # 167 bytes: three quarters of one, then 41
    ],
    ids=["half an e-acute", "between two", "part of an emoji"],
)
def test_a_site_cut_to_fit_the_record_starts_at_a_whole_character(site, recorded):
    # the debug helpers' compile-time function (castpile/compiler/helpers/deadlines.py), run as Python, and the
    # host's reading of what it wrote (castpile/gpu/wait_deadlines.py)
    from castpile.compiler.helpers import deadlines
    from castpile.gpu import wait_deadlines

    words = wait_deadlines.SITE_WORDS
    assert 8 * words == 176  # so the tails above: 176 bytes, "..." and 173 of the site's last bytes at most
    entry = [1, 0, 1, 0, 10**9, 0, 0, 0, -1, 0] + [
        deadlines._castpile_site_word.fn(site, k, words) for k in range(words)
    ]
    record = [1, *entry, *[0] * (wait_deadlines.RECORD_WORDS - 1 - len(entry))]
    [found], _ = wait_deadlines.entries_in(record)
    assert found.site == recorded


DEBUG_NOTE = (
    "# debug mode (CASTPILE_DEBUG_WAITS): the _until helpers give up at deadline_ns, recording their site; "
    'docs/one-gpu.md, "Hangs that name their line"'
)


def test_debug_mode_output_says_what_it_is_under_its_helpers_header():
    header = "# ---- castpile 0.3.0 helpers: generated, called by the rewritten accesses above ----"
    debug = castpile.transpile(SOURCE, "waits.py", debug_waits=2.0).decode().splitlines()
    assert debug[debug.index(header) + 1] == DEBUG_NOTE
    normal = castpile.transpile(SOURCE, "waits.py").decode().splitlines()
    assert normal[normal.index(header) + 1] == "import triton"
    assert DEBUG_NOTE not in castpile.transpile(SIGNAL_ONLY, "waits.py", debug_waits=2.0).decode()  # nothing spins


# -- a user's kernels on simulated ranks: debug mode computes what normal mode does ---------------------------------

USER_KERNELS = '''
import triton
import triton.language as tl

import castpile
from castpile import Multicast, multicast_like as mcl, signal, wait


@triton.jit
def _meet(pads: castpile.Multicast, pad, rank, W: tl.constexpr, WP: tl.constexpr):
    castpile.signal(pads[rank], wait_for=0)
    peers = tl.arange(0, WP)
    castpile.wait(pad + peers, mask=peers < W)


@triton.jit
def rounds(out, pad, pad_ptrs, buf_ptrs, rank, ROUNDS: tl.constexpr, W: tl.constexpr, WP: tl.constexpr,
           BLOCK: tl.constexpr):
    """Each round every rank sums the rows of its buffer, then writes sum + rank into row `rank` of every peer's."""
    pads = castpile.multicast_like(pad, pad_ptrs[:W], shape=(WP,))
    bufs = castpile.multicast_like(out, buf_ptrs[:W], shape=(W * BLOCK,))
    offs = tl.arange(0, BLOCK)
    for r in range(ROUNDS):
        acc = tl.zeros([BLOCK], tl.float32)
        for q in tl.static_range(W):
            acc += tl.load(out + q * BLOCK + offs)
        tl.debug_barrier()
        _meet(pads, pad, rank, W, WP)
        tl.debug_barrier()
        bufs[rank * BLOCK + offs] = acc + rank
        tl.debug_barrier()
        _meet(pads, pad, rank, W, WP)
        tl.debug_barrier()


@triton.jit
def _arrive(counters: Multicast, slot):
    signal(counters[slot], op="add")


@triton.jit
def counted(pad, pad_ptrs, slot, MEETINGS: tl.constexpr, W: tl.constexpr):
    counters = mcl(pad, pad_ptrs[:W], shape=(64,))
    for meeting in tl.static_range(MEETINGS):
        _arrive(counters, slot)
        wait(pad + slot, (meeting + 1) * W, "ge", reset=None)


@triton.jit
def epoch(pad, pad_ptrs, owner, rank, EPOCH: tl.constexpr):
    at_owner = mcl(pad, tl.load(pad_ptrs + owner), shape=(8,))
    if rank == owner:
        signal(at_owner[1], EPOCH)
    wait(at_owner[1],
         EPOCH,
         cmp="ge",
         reset=None)


@triton.jit
def block_flags(pad, pad_ptrs, n, W: tl.constexpr, WP: tl.constexpr, BLOCK: tl.constexpr):
    """Every rank adds 1 to flags [16, 16 + n) of every rank, then waits for its own to reach W, lowering them."""
    ranks = tl.arange(0, WP)
    tile = tl.load(pad_ptrs + ranks, mask=ranks < W, other=0)
    flags = mcl(pad, tile, shape=(16 + BLOCK,), ptr_mask=ranks < W)
    offs = tl.arange(0, BLOCK)
    signal(flags[16 + offs], op="add", mask=offs < n)
    wait(pad + 16 + offs, W * 1, cmp="eq", mask=offs < n)
'''
W, BLOCK = 3, 8


def user_kernels(tmp_path, mode: str, seconds: float | None):
    path = tmp_path / f"user_{mode}.py"
    path.write_bytes(castpile.transpile(USER_KERNELS, path.name, debug_waits=seconds))
    return path


def on_three_ranks(kernels) -> list[dict]:
    from castpile.gpu import check_waits, sim

    handles = sim.symmetric_empty(W, (W * BLOCK,), torch.float32)

    def body(rank):
        symm = handles[rank]
        symm.tensor.copy_(torch.arange(W * BLOCK, dtype=torch.float32) * (rank + 1))
        pad, pads = symm.signal_pad, symm.signal_pad_ptrs
        kernels.rounds[(1,)](symm.tensor, pad, pads, symm.buffer_ptrs, rank, ROUNDS=2, W=W, WP=4, BLOCK=BLOCK)
        kernels.counted[(1,)](pad, pads, 10, MEETINGS=3, W=W)
        kernels.epoch[(1,)](pad, pads, 1, rank, EPOCH=4)
        kernels.block_flags[(1,)](pad, pads, 5, W=W, WP=4, BLOCK=8)
        return {"buffer": symm.tensor.clone(), "pad": pad.clone()}

    outs = sim.run(body, W, timeout=120)
    check_waits()  # nothing gave up: the interpreter has no clock
    return outs


def test_a_users_kernels_on_simulated_ranks_compute_the_same_in_debug_mode(tmp_path):
    start = [torch.arange(W * BLOCK, dtype=torch.float32) * (r + 1) for r in range(W)]
    buffers = [b.clone() for b in start]
    for _ in range(2):  # rounds, by hand
        sums = [b.view(W, BLOCK).sum(0) for b in buffers]
        for peer in range(W):
            for r in range(W):
                buffers[peer][r * BLOCK : (r + 1) * BLOCK] = sums[r] + r
    for mode, seconds in (("normal", None), ("debug", 3.0)):
        outs = on_three_ranks(import_file(user_kernels(tmp_path, mode, seconds), f"user_{mode}"))
        for rank, out in enumerate(outs):
            assert torch.equal(out["buffer"], buffers[rank]), (mode, rank)
            pad = torch.zeros(64, dtype=torch.int32)
            pad[10] = 3 * W  # the counter: W arrivals at each of 3 meetings, never reset
            pad[1] = 4 if rank == 1 else 0  # the owner's epoch flag, never reset
            assert torch.equal(out["pad"], pad), (mode, rank)


TYPES = {"out": "*fp32", "pad": "*i32", "pad_ptrs": "*i64", "buf_ptrs": "*i64"}  # every other parameter: i32
CONSTEXPRS = {
    "rounds": {"ROUNDS": 2, "W": W, "WP": 4, "BLOCK": BLOCK},
    "counted": {"MEETINGS": 3, "W": W},
    "epoch": {"EPOCH": 4},
    "block_flags": {"W": W, "WP": 4, "BLOCK": 8},
}


def test_a_users_kernels_compile_for_sm90_with_a_clock_in_debug_mode_only(tmp_path):
    jobs = []
    for mode, seconds in (("normal", None), ("debug", 3.0)):
        path = user_kernels(tmp_path, mode, seconds)
        for kernel, constexprs in CONSTEXPRS.items():
            jobs.append(Job(path, kernel, signature(USER_KERNELS, kernel, TYPES), constexprs, name=f"{mode} {kernel}"))
    results = compile_for_sm90(jobs, tmp_path, processes=2)
    assert {name: r.error for name, r in results.items() if not r.ok} == {}
    for name, result in results.items():
        assert ("%globaltimer" in result.ptx.read_text()) == name.startswith("debug"), name


REMOTE_WAIT = b"""\
import triton
import triton.language as tl
import castpile


@triton.jit
def wait_remote(pad, pad_ptrs, W: tl.constexpr):
    pads = castpile.multicast_like(pad, pad_ptrs[:W], shape=(4,), remote="nvshmem")
    castpile.wait(pads[0])
"""


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
def test_every_helper_the_debug_mode_output_names_is_in_it(strategy):
    # a reader of the output follows a name in a docstring to its def: it must be there
    for source in (USER_KERNELS.encode(), REMOTE_WAIT):
        text = castpile.transpile(source, "user.py", strategy=strategy, debug_waits=3.0).decode()
        defined = set(re.findall(r"^def (_castpile_\w+)|^(_castpile_\w+) =", text, re.M))
        defined = {name for pair in defined for name in pair if name}
        named = set(re.findall(r"(?<![.\"'])\b_castpile_\w+", text))  # not an attribute's name (.x, "x")
        assert named - defined == set()
