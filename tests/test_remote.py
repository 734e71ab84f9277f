"""remote="nvshmem" bindings on the simulator: every access kind against torch, with every peer or some peers remote.

The semantic kernels (tests/kernels_semantics.py) are rerun with ``remote="nvshmem"``
added to each table binding (kernels that castpile refuses on a remote binding, atomics,
and the tensor-tile kernels, are left out). Each runs in a forked rank of
:mod:`castpile.gpu.sim` over ``sim.symmetric_scratch(..., local_world_size=k)`` tables:
``k=1`` makes every peer remote, ``k=2`` mixes NVLink-style loads and stores with NVSHMEM
transfers. A remote entry is never a loadable address, so a lowering that loads or stores
where it should transfer crashes the rank or reads the wrong buffer; tests at the end
check that both mistakes fail these checks. Compiling remote modules and importing them without NVSHMEM:
tests/test_remote_modules.py; the GPU scripts' kernels on the simulator: test_remote_gpu_scripts.py.
"""

from pathlib import Path

import pytest
import torch
import triton

from castpile.gpu import sim
from testkit import padded, transpiled
from testkit.references import buffers, padded_stack  # the semantic tests' references
from testkit.remote import TRANSFER_KERNELS, crash_expected, on_rank, remote_source, symmetric
from testkit.signal_wait import KERNELS as SIGNAL_WAIT_KERNELS, check_two_signals_in_a_row_both_arrive

CASES = [(w, lws, rank) for w in (2, 3, 4) for lws in (1, 2) for rank in sorted({0, w - 1})]
IDS = [f"W{w}-lws{lws}-rank{rank}" for w, lws, rank in CASES]


@pytest.fixture(scope="module")
def k(tmp_path_factory):
    return transpiled(tmp_path_factory.mktemp("remote"), remote_source(), "kernels_remote")


def assert_remote(scratch, rank, lws):
    """The table really has remote entries for this rank (else the test proves nothing about them)."""
    table = scratch[rank].remote_ptrs
    remote = [(int(e) >> 48) != 0 for e in table]
    assert remote == [not ok for ok in scratch[rank].reachable]
    assert any(remote) or len(scratch) <= lws


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
@pytest.mark.parametrize("w,lws,rank", CASES, ids=IDS)
def test_load(k, w, lws, rank, dtype):
    n, block = 13, 16
    bufs = buffers(w, n, dtype)
    s = symmetric(w, lws, n, dtype, bufs)
    assert_remote(s, rank, lws)

    def body():
        out = torch.full((padded(w) * block,), 99, dtype=dtype)
        k.load_stack[(1,)](out, s[rank].remote_ptrs, n, w, block)
        return out

    assert torch.equal(on_rank(body).view(padded(w), block), padded_stack(bufs, padded(w), block))


REDUCTIONS = {
    "sum": lambda full, dtype: full.sum(0, dtype=torch.int32 if dtype == torch.int32 else dtype),
    "max": lambda full, dtype: full.max(0).values,
    "min": lambda full, dtype: full.min(0).values,
    "sum_f32": lambda full, dtype: full.float().sum(0),
    "masked_max": lambda full, dtype: torch.cat([full[:, :-3], torch.zeros_like(full[:, -3:])], 1).max(0).values,
}


REDUCTION_CASES = [(d, op) for d in (torch.float32, torch.int32) for op in REDUCTIONS] + [(torch.bfloat16, "sum_f32")]


@pytest.mark.parametrize("dtype,op", REDUCTION_CASES)
@pytest.mark.parametrize("w,lws,rank", CASES, ids=IDS)
def test_reductions(k, w, lws, rank, dtype, op):
    n, block = 37, 16  # three programs, the last one partly out of bounds
    bufs = buffers(w, n, dtype, seed=w)
    s = symmetric(w, lws, n, dtype, bufs)
    out_dtype = torch.float32 if op == "sum_f32" else dtype

    def body():
        out = torch.zeros(n, dtype=out_dtype)
        k.reduce_stack[(3,)](out, s[rank].tensor, s[rank].remote_ptrs, n, op, w, block)
        return out

    assert torch.equal(on_rank(body), REDUCTIONS[op](torch.stack(bufs), dtype).to(out_dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
@pytest.mark.parametrize("w,lws,rank", CASES, ids=IDS)
def test_store_one_row_everywhere(k, w, lws, rank, dtype):
    n, block = 21, 8
    s = symmetric(w, lws, n + 4, dtype, [torch.zeros(n + 4, dtype=dtype)] * w)  # 4 guard elements past n
    src = buffers(1, n, dtype)[0]
    on_rank(lambda: k.store_row[(3,)](src, s[rank].remote_ptrs, n, w, block))
    for j, b in enumerate(s):
        assert torch.equal(b.tensor[:n], src) and not b.tensor[n:].any(), f"buffer {j}"


@pytest.mark.parametrize("w,lws,rank", CASES, ids=IDS)
def test_store_full_tensor_row_per_buffer(k, w, lws, rank):
    n, block = 6, 8
    s = symmetric(w, lws, n + 2, torch.float32, [torch.zeros(n + 2)] * w)
    src = torch.arange(padded(w) * block, dtype=torch.float32)
    on_rank(lambda: k.store_full[(1,)](src, s[rank].remote_ptrs, n, w, block))
    for j, b in enumerate(s):
        assert torch.equal(b.tensor[:n], src.view(padded(w), block)[j, :n]) and not b.tensor[n:].any(), f"buffer {j}"


@pytest.mark.parametrize("w,lws,rank", CASES, ids=IDS)
def test_scatter_rank_scalar_index(k, w, lws, rank):
    s = symmetric(w, lws, 5, torch.int32, [torch.full((5,), -1, dtype=torch.int32)] * w)
    on_rank(lambda: k.scatter_rank[(1,)](s[rank].tensor, s[rank].remote_ptrs, 3, w))
    for j, b in enumerate(s):
        expected = torch.full((5,), -1, dtype=torch.int32)
        expected[3] = j
        assert torch.equal(b.tensor, expected), f"buffer {j}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
@pytest.mark.parametrize("w,lws,rank", CASES, ids=IDS)
def test_augmented_store(k, w, lws, rank, dtype):
    n, block = 7, 8
    bufs = buffers(w, n + 1, dtype, seed=3)
    s = symmetric(w, lws, n + 1, dtype, bufs)
    src = buffers(1, n, dtype, seed=4)[0]
    on_rank(lambda: k.augmented[(1,)](src, s[rank].remote_ptrs, n, w, block))
    for j, (b, old) in enumerate(zip(s, bufs)):
        assert torch.equal(b.tensor[:n], (old[:n] + src) * 2) and b.tensor[n] == old[n], f"buffer {j}"


@pytest.mark.parametrize("w,lws,rank", CASES, ids=IDS)
def test_tl_load_and_store_keywords(k, w, lws, rank):
    n, m, block = 10, 6, 16
    bufs = buffers(w, n, torch.float32, seed=5)
    s = symmetric(w, lws, n, torch.float32, bufs)

    def body():
        out = torch.zeros(padded(w) * block)
        k.load_store_calls[(1,)](out, s[rank].remote_ptrs, n, m, w, block)
        return out

    out = on_rank(body)
    assert torch.equal(out.view(padded(w), block), padded_stack([b[:m] for b in bufs], padded(w), block, fill=-1))
    for j, (b, old) in enumerate(zip(s, bufs)):
        ref = old.clone()
        ref[0:m:2] = old[0:m:2] + 100
        ref[m:n:2] = -1 + 100  # masked loads gave `other`; even lanes below n are stored, odd ones never touched
        assert torch.equal(b.tensor, ref), f"buffer {j}"


@pytest.mark.parametrize("kernel", ["elements_2d", "strided_2d"])
@pytest.mark.parametrize("w,lws,rank", CASES, ids=IDS)
def test_two_dim_elements(k, w, lws, rank, kernel):
    """(M, N) buffers read as (BI, BJ) tiles: the lanes' offsets are not one run (the span is fetched and gathered)."""
    m, n, bi, bj = 3, 5, 4, 8
    bufs = buffers(w, m * n, torch.float32, seed=6)
    s = symmetric(w, lws, m * n, torch.float32, bufs)

    def body():
        out = torch.full((padded(w) * bi * bj,), 99.0)
        getattr(k, kernel)[(1,)](out, s[rank].remote_ptrs, m, n, w, bi, bj)
        return out

    ref = torch.zeros(padded(w), bi, bj)
    for j, b in enumerate(bufs):
        ref[j, :m, :n] = b.view(m, n) if kernel == "elements_2d" else b.view(n, m).t()
    assert torch.equal(on_rank(body).view(padded(w), bi, bj), ref)


@pytest.mark.parametrize("w,lws,rank", CASES, ids=IDS)
def test_signal_then_wait_leaves_flags_zero(k, w, lws, rank):
    """signal with wait_for (poll, then put, on a remote flag) then wait (poll, then reset) on every rank's flag."""
    s = symmetric(w, lws, 4, torch.int32, [torch.zeros(4, dtype=torch.int32)] * w)
    on_rank(lambda: k.signal_then_wait[(1,)](s[rank].tensor, s[rank].remote_ptrs, w))
    assert all(not b.tensor.any() for b in s)


@pytest.mark.parametrize("w,lws", [(2, 1), (3, 1), (3, 2)])
def test_signal_by_exchange(k, w, lws):
    """Rank 0 raises flag 0 of every rank to 7 (its own by an exchange, remote ones by puts) and lowers its own."""
    s = symmetric(w, lws, 2, torch.int32, [torch.zeros(2, dtype=torch.int32)] * w)
    on_rank(lambda: k.signal_exchange_wait_plain[(1,)](s[0].tensor, s[0].remote_ptrs, w))
    assert s[0].tensor.tolist() == [0, 0] and all(b.tensor.tolist() == [7, 0] for b in s[1:])


# -- transfers larger than the scratch, offsets that are not one run, ranks signalling each other ------------


def more(directory, broken=None):
    """These kernels, with test_signal_wait's ``collect`` and ``wait_rounds`` (waits on this rank's own pad)."""
    return transpiled(
        directory,
        SIGNAL_WAIT_KERNELS + TRANSFER_KERNELS.split("import castpile as cp\n", 1)[1],
        "remote_more",
        broken=broken,
    )


@pytest.mark.parametrize("reverse", [True, False], ids=["one-run-reversed", "strided-per-element"])
@pytest.mark.parametrize("w,lws,rank", [(2, 1, 0), (3, 2, 2), (4, 2, 1)])
def test_transfers_larger_than_the_scratch(w, lws, rank, reverse, tmp_path, monkeypatch):
    """A 1 KiB scratch over 4 programs: 64 floats each.  Gets of a span of 7 * 128 lanes come in 14
    chunks; a reversed block of 128 lanes is one run but more than 64 elements, and strided lanes are
    no run: both are put element by element, 64 lanes at a time; masked lanes are never read."""
    monkeypatch.setattr(sim, "SIM_REMOTE_SCRATCH_BYTES", 1024)
    check_transfers(more(tmp_path), w, lws, rank, reverse)


def check_transfers(k, w, lws, rank, reverse):
    programs, block, stride = 4, 128, 7
    lanes = programs * block
    n = lanes * stride
    bufs = buffers(w, n, torch.float32, seed=w)
    s = symmetric(w, lws, n, torch.float32, bufs)
    src = torch.arange(lanes, dtype=torch.float32)

    def body():
        out = torch.zeros(padded(w) * lanes)
        k.gather_scatter[(programs,)](out, src, s[rank].remote_ptrs, n, stride, reverse, w, block)
        return out

    out = on_rank(body).view(padded(w), lanes)
    idx = torch.arange(lanes)
    for j, old in enumerate(bufs):
        expected = torch.where(idx % 3 != 1, old[idx * stride], torch.tensor(-5.0))
        assert torch.equal(out[j], expected), f"buffer {j} read"
        ref = old.clone()
        at = (idx // block) * block + (block - 1 - idx % block) if reverse else idx * stride
        ref[at] = src + 1000 * j
        assert torch.equal(s[j].tensor, ref), f"buffer {j} written"


def _rows(w):
    return [torch.arange(N_ROW, dtype=torch.float32) + 100 * (r + 1) for r in range(w)]


N_ROW, BLOCK_ROW = 5, 8


def check_publish_collect(k, w, lws, wait_for, timeout=60.0):
    """Every rank writes its row into every rank's data and raises its flag everywhere (puts and signals to
    remote ranks), then waits for every flag on its own pad and reads the W rows."""
    handles = sim.symmetric_empty(w, (w, N_ROW), torch.float32, local_world_size=lws)
    rows = _rows(w)
    for h in handles:
        h.tensor.fill_(float("nan"))

    def body(rank):
        h = handles[rank]
        k.publish_remote[(1,)](
            h.tensor,
            rows[rank],
            h.remote_ptrs,
            h.signal_pad,
            h.signal_pad_remote_ptrs,
            rank,
            N_ROW,
            w,
            BLOCK_ROW,
            wait_for,
        )
        out = torch.full((w, N_ROW), float("nan"))
        k.collect[(1,)](
            out, h.tensor, h.signal_pad, None, rank, N_ROW, w, triton.next_power_of_2(w), BLOCK_ROW, False
        )  # test_signal_wait's: waits on this rank's pad through plain pointers
        return out

    for rank, out in enumerate(sim.run(body, w, timeout=timeout)):
        assert torch.equal(out, torch.stack(rows)), f"rank {rank} read {out.tolist()}"
    for rank, h in enumerate(handles):
        assert not h.signal_pad.any(), f"rank {rank}'s flags end at {h.signal_pad.tolist()}"


@pytest.mark.parametrize("wait_for", [False, True], ids=["exchange", "wait_for"])
@pytest.mark.parametrize("w,lws", [(2, 1), (3, 1), (4, 2)])
def test_ranks_publish_and_signal_each_other(w, lws, wait_for, tmp_path):
    check_publish_collect(more(tmp_path), w, lws, wait_for)


def check_two_rounds(k, give_up_s=1.0, timeout=60.0):
    """test_signal_wait's check, with rank 1 raising flag 1 on both ranks (rank 0 remote) and lowering its own."""
    check_two_signals_in_a_row_both_arrive(
        k,
        give_up_s=give_up_s,
        timeout=timeout,
        handles=sim.symmetric_empty(2, (4,), torch.float32, local_world_size=1),
        signal_twice=lambda h: k.signal_rounds_remote[(1,)](h.signal_pad, h.signal_pad_remote_ptrs, 1, 2, 2),
    )


def test_two_remote_signals_in_a_row_are_both_received(tmp_path):
    check_two_rounds(more(tmp_path))


# -- the checks fail when the lowering takes the wrong path ---------------------------------------------------


def test_a_plain_lowering_on_a_remote_table_fails(tmp_path):
    """The same kernels without remote=: a remote entry is no address, so the rank dies (not a wrong answer)."""
    plain = transpiled(
        tmp_path, remote_source().replace(', remote="nvshmem"', "").replace(", remote='nvshmem'", ""), "kernels_plain"
    )
    assert "_remote" not in Path(plain.__file__).read_text()
    with crash_expected(), pytest.raises(sim.RankError, match="rank 0"):
        test_load(plain, 2, 1, 0, torch.float32)
    with crash_expected(), pytest.raises(sim.RankError, match="rank 0"):
        test_store_one_row_everywhere(plain, 2, 1, 0, torch.float32)


def test_a_remote_load_from_the_own_copy_fails(tmp_path):
    """A remote entry's address is this rank's own copy: loading it reads the wrong buffer."""
    broken = transpiled(
        tmp_path, remote_source(), "kernels_broken_load", ("_castpile_load_remote", "if pe < 0:", "if True:")
    )
    with pytest.raises(AssertionError):
        test_load(broken, 3, 1, 0, torch.float32)


def test_a_remote_store_that_puts_nothing_fails(tmp_path):
    broken = transpiled(
        tmp_path,
        remote_source(),
        "kernels_broken_store",
        ("_castpile_store_remote", "_castpile_remote_put(addr, pe,", "_castpile_remote_get(addr, pe,"),
    )
    with pytest.raises(AssertionError, match="buffer 1"):
        test_store_one_row_everywhere(broken, 2, 1, 0, torch.float32)


def test_a_put_of_more_than_the_lanes_fails(tmp_path, monkeypatch):
    """The one-put path taken for strided lanes too: the elements between them are overwritten."""
    monkeypatch.setattr(sim, "SIM_REMOTE_SCRATCH_BYTES", 1 << 16)  # room for the whole run: only the lanes are wrong
    k = more(tmp_path, ("_castpile_remote_put", "if (count > 0) & run & (count <= chunk):", "if count > 0:"))
    with pytest.raises(AssertionError, match="buffer 1 written"):
        check_transfers(k, 2, 1, 0, reverse=False)


def test_a_remote_signal_that_ignores_wait_for_loses_the_second_signal(tmp_path):
    k = more(
        tmp_path,
        (
            "_castpile_signal_remote",
            "            if wait_for is None:\n                _castpile_remote_put",
            "            if True:\n                _castpile_remote_put",
        ),
    )
    with pytest.raises(sim.RankTimeout) as hung:
        check_two_rounds(k, give_up_s=float("inf"), timeout=4.0)
    assert hung.value.hung == [0]
