"""remote="nvshmem" bindings on the simulator: every access kind against torch, with every peer or some peers remote.

The semantic kernels (tests/kernels_semantics.py) are rerun with ``remote="nvshmem"``
added to each table binding (kernels that castpile refuses on a remote binding, atomics,
and the tensor-tile kernels, are left out). Each runs in a forked rank of
:mod:`castpile.gpu.sim` over ``sim.symmetric_scratch(..., local_world_size=k)`` tables:
``k=1`` makes every peer remote, ``k=2`` mixes NVLink-style loads and stores with NVSHMEM
transfers. A remote entry is never a loadable address, so a lowering that loads or stores
where it should transfer crashes the rank or reads the wrong buffer; tests at the end
check that both mistakes fail these checks.
"""

import contextlib
import faulthandler
import os
from pathlib import Path

import pytest
import torch
import triton

import castpile
from castpile.gpu import sim
from testkit import import_file, padded, transpiled
from testkit.references import buffers, padded_stack  # the semantic tests' references
from testkit.remote import remote_source, symmetric
from testkit.signal_wait import KERNELS as SIGNAL_WAIT_KERNELS, check_two_signals_in_a_row_both_arrive

CASES = [(w, lws, rank) for w in (2, 3, 4) for lws in (1, 2) for rank in sorted({0, w - 1})]
IDS = [f"W{w}-lws{lws}-rank{rank}" for w, lws, rank in CASES]


@pytest.fixture(scope="module")
def k(tmp_path_factory):
    return transpiled(tmp_path_factory.mktemp("remote"), remote_source(), "kernels_remote")


_CRASH_EXPECTED = []


@contextlib.contextmanager
def crash_expected():
    """Ranks forked inside die on purpose: they print no faulthandler traceback (the RankError says how they died)."""
    _CRASH_EXPECTED.append(True)
    try:
        yield
    finally:
        _CRASH_EXPECTED.pop()


def on_rank(fn, timeout=60.0):
    """``fn()`` in a forked simulated rank: a crash (a load from a remote entry) fails the test as a RankError."""

    def body(_):
        if _CRASH_EXPECTED:
            faulthandler.disable()
        return fn()

    return sim.run(body, 1, timeout=timeout)[0]


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

KERNELS = '''
import triton
import triton.language as tl

import castpile as cp


@triton.jit
def gather_scatter(out, src, table, n, STRIDE: tl.constexpr, REVERSE: tl.constexpr, W: tl.constexpr,
                   BLOCK: tl.constexpr):
    """out[p, lanes] = buffer p at lanes * STRIDE; then buffer p at perm(lanes) = src[lanes] (perm: reversed
    within the program's block, or lanes * STRIDE)."""
    bufs = cp.multicast_like(out, table[:W], shape=(n,), remote="nvshmem")
    lanes = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    rows = tl.arange(0, triton.next_power_of_2(W))
    x = tl.load(bufs[lanes * STRIDE], mask=lanes % 3 != 1, other=-5)
    tl.store(out + rows[:, None] * (tl.num_programs(0) * BLOCK) + lanes[None, :], x)
    if REVERSE:
        at = tl.program_id(0) * BLOCK + (BLOCK - 1 - tl.arange(0, BLOCK))
    else:
        at = lanes * STRIDE
    bufs[at] = tl.load(src + lanes)[None, :] + rows[:, None] * 1000


@triton.jit
def publish_remote(data, src, buf_ptrs, pad, pad_ptrs, rank, n, W: tl.constexpr, BLOCK: tl.constexpr, WAIT_FOR: tl.constexpr):
    """Write ``src`` into row ``rank`` of every rank's ``data``, then raise flag ``rank`` on every rank."""
    rows = cp.multicast_like(data, buf_ptrs[:W], shape=(W, n), remote="nvshmem")
    offs = tl.arange(0, BLOCK)
    rows[rank, offs] = tl.load(src + offs, mask=offs < n)
    tl.debug_barrier()
    flags = cp.multicast_like(pad, pad_ptrs[:W], shape=(W,), remote="nvshmem")
    if WAIT_FOR:
        cp.signal(flags[rank], wait_for=0)
    else:
        cp.signal(flags[rank])


@triton.jit
def signal_rounds_remote(pad, pad_ptrs, rank, W: tl.constexpr, ROUNDS: tl.constexpr):
    """ROUNDS times: raise flag ``rank`` on every rank once its owner has lowered it, and lower this rank's own."""
    flags = cp.multicast_like(pad, pad_ptrs[:W], shape=(W,), remote="nvshmem")
    for _ in tl.static_range(ROUNDS):
        cp.signal(flags[rank], wait_for=0)
        cp.wait(pad + rank + tl.arange(0, 1))
'''


def more(directory, broken=None):
    """These kernels, with test_signal_wait's ``collect`` and ``wait_rounds`` (waits on this rank's own pad)."""
    return transpiled(directory, SIGNAL_WAIT_KERNELS + KERNELS.split("import castpile as cp\n", 1)[1], "remote_more",
                      broken=broken)


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
        k.publish_remote[(1,)](h.tensor, rows[rank], h.remote_ptrs, h.signal_pad, h.signal_pad_remote_ptrs, rank, N_ROW, w, BLOCK_ROW,
                        wait_for)
        out = torch.full((w, N_ROW), float("nan"))
        k.collect[(1,)](out, h.tensor, h.signal_pad, None, rank, N_ROW, w, triton.next_power_of_2(w), BLOCK_ROW,
                        False)  # test_signal_wait's: waits on this rank's pad through plain pointers
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
        k, give_up_s=give_up_s, timeout=timeout, handles=sim.symmetric_empty(2, (4,), torch.float32, local_world_size=1),
        signal_twice=lambda h: k.signal_rounds_remote[(1,)](h.signal_pad, h.signal_pad_remote_ptrs, 1, 2, 2))


def test_two_remote_signals_in_a_row_are_both_received(tmp_path):
    check_two_rounds(more(tmp_path))


# -- the checks fail when the lowering takes the wrong path ---------------------------------------------------


def test_a_plain_lowering_on_a_remote_table_fails(tmp_path):
    """The same kernels without remote=: a remote entry is no address, so the rank dies (not a wrong answer)."""
    plain = transpiled(tmp_path, remote_source().replace(', remote="nvshmem"', "").replace(
        ", remote='nvshmem'", ""), "kernels_plain")
    assert "_remote" not in Path(plain.__file__).read_text()
    with crash_expected(), pytest.raises(sim.RankError, match="rank 0"):
        test_load(plain, 2, 1, 0, torch.float32)
    with crash_expected(), pytest.raises(sim.RankError, match="rank 0"):
        test_store_one_row_everywhere(plain, 2, 1, 0, torch.float32)


def test_a_remote_load_from_the_own_copy_fails(tmp_path):
    """A remote entry's address is this rank's own copy: loading it reads the wrong buffer."""
    broken = transpiled(tmp_path, remote_source(), "kernels_broken_load", ("_castpile_load_remote", "if pe < 0:", "if True:"))
    with pytest.raises(AssertionError):
        test_load(broken, 3, 1, 0, torch.float32)


def test_a_remote_store_that_puts_nothing_fails(tmp_path):
    broken = transpiled(tmp_path, remote_source(), "kernels_broken_store",
                        ("_castpile_store_remote", "_castpile_remote_put(addr, pe,", "_castpile_remote_get(addr, pe,"))
    with pytest.raises(AssertionError, match="buffer 1"):
        test_store_one_row_everywhere(broken, 2, 1, 0, torch.float32)


def test_a_put_of_more_than_the_lanes_fails(tmp_path, monkeypatch):
    """The one-put path taken for strided lanes too: the elements between them are overwritten."""
    monkeypatch.setattr(sim, "SIM_REMOTE_SCRATCH_BYTES", 1 << 16)  # room for the whole run: only the lanes are wrong
    k = more(tmp_path, ("_castpile_remote_put", "if (count > 0) & run & (count <= chunk):", "if count > 0:"))
    with pytest.raises(AssertionError, match="buffer 1 written"):
        check_transfers(k, 2, 1, 0, reverse=False)


def test_a_remote_signal_that_ignores_wait_for_loses_the_second_signal(tmp_path):
    k = more(tmp_path, ("_castpile_signal_remote", "            if wait_for is None:\n                _castpile_remote_put",
                        "            if True:\n                _castpile_remote_put"))
    with pytest.raises(sim.RankTimeout) as hung:
        check_two_rounds(k, give_up_s=float("inf"), timeout=4.0)
    assert hung.value.hung == [0]


# -- compiling for sm_90 -----------------------------------------------------------------------------------

SM90_DRIVER = r'''
import importlib.util, json, re, sys
import torch.utils._triton
torch.utils._triton.has_triton = lambda: True  # a CPU torch leaves _nvshmem_triton's device functions out otherwise
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

path, jobs = sys.argv[1], json.loads(sys.argv[2])
text = open(path).read()
text = re.sub(r"^(\w+) = _castpile_remote_kernel\(\1\)$", "", text, flags=re.M)  # requires_nvshmem needs the device library
open(path, "w").write(text)
spec = importlib.util.spec_from_file_location("remote_sm90", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
results = {}
for name, signature, constexprs in jobs:
    try:
        triton.compile(ASTSource(getattr(module, name), signature, constexprs), target=GPUTarget("cuda", 90, 32))
        results[name] = "cubin"
    except Exception as exc:
        chain = []
        while exc is not None:  # Triton's compile errors nest: the innermost says what went wrong
            chain.append(str(exc))
            exc = exc.__cause__
        results[name] = "\n".join(chain)
print(json.dumps(results))
'''


def test_remote_kernels_compile_for_sm90_up_to_nvshmem_linking(tmp_path):
    """Every remote helper goes through Triton's whole pipeline to PTX for sm_90 with torch's NVSHMEM
    device functions; ptxas then stops at the first NVSHMEM symbol, which only libnvshmem_device.bc
    (absent on this CPU machine: torch's requires_nvshmem links it on GPUs) provides."""
    import json
    import subprocess
    import sys

    source = remote_source() + KERNELS.split("import castpile as cp\n", 1)[1]
    path = tmp_path / "remote_sm90.py"
    path.write_text(castpile.transpile(source.encode(), "remote_sm90.py").decode())
    table = {"table": "*i64", "n": "i32", "W": "constexpr", "BLOCK": "constexpr"}
    jobs = [
        ("load_stack", {"out": "*fp32", **table}, {"W": 3, "BLOCK": 64}),
        ("reduce_stack", {"out": "*fp32", "example": "*fp32", **table, "OP": "constexpr"}, {"W": 4, "BLOCK": 64, "OP": "sum"}),
        ("store_row", {"src": "*bf16", **table}, {"W": 2, "BLOCK": 128}),
        ("augmented", {"src": "*i32", **table}, {"W": 3, "BLOCK": 32}),
        ("signal_then_wait", {"example": "*i32", "table": "*i64", "W": "constexpr"}, {"W": 4}),
        ("gather_scatter", {"out": "*fp32", "src": "*fp32", **table, "STRIDE": "constexpr", "REVERSE": "constexpr"},
         {"W": 2, "BLOCK": 128, "STRIDE": 7, "REVERSE": False}),
    ]
    gpu_script = tmp_path / "nvshmem_kernels_loop.py"  # the GPU proof's kernel, as checked in
    gpu_script.write_text((Path(__file__).parents[1] / "benchmarks/kernels/generated/nvshmem_kernels_loop.py").read_text())
    all_reduce = [("all_reduce_remote", {"buf": "*bf16", "buf_ptrs": "*i64", "pad": "*i32", "pad_ptrs": "*i64",
                                         "out": "*bf16", "rank": "i32", "n": "i32", "WORLD": "constexpr",
                                         "BLOCK": "constexpr"}, {"WORLD": 2, "BLOCK": 1024}),
                  ("all_reduce_residual_rmsnorm_remote",
                   {"buf": "*bf16", "buf_ptrs": "*i64", "pad": "*i32", "pad_ptrs": "*i64", "residual": "*bf16",
                    "weight": "*bf16", "out": "*bf16", "rank": "i32", "m": "i32", "d": "i32", "eps": "fp32",
                    "WORLD": "constexpr", "BLOCK": "constexpr"}, {"WORLD": 2, "BLOCK": 8192}),
                  ("all_gather_remote", {"buf": "*bf16", "buf_ptrs": "*i64", "pad": "*i32", "pad_ptrs": "*i64",
                                         "rank": "i32", "n": "i32", "WORLD": "constexpr", "BLOCK": "constexpr"},
                   {"WORLD": 2, "BLOCK": 1024})]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "cache")
    results = {}
    for module, kernels in ((path, jobs), (gpu_script, all_reduce)):
        proc = subprocess.run([sys.executable, "-c", SM90_DRIVER, str(module), json.dumps(kernels)], env=env,
                              capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr[-4000:]
        results.update(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert len(results) == len(jobs) + len(all_reduce)
    for name, outcome in results.items():
        if outcome == "cubin":  # a machine with NVSHMEM_LIB_DIR/libnvshmem_device.bc would link
            continue
        assert "ptxas fatal   : Unresolved extern function 'nvshmem" in outcome, f"{name}: {outcome[-3000:]}"


# -- a module without NVSHMEM's device library -------------------------------------------------------------

WITHOUT_LIBRARY = r'''
import importlib.util, sys
spec = importlib.util.spec_from_file_location("remote_module", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print("imported:", type(module.plain).__name__, type(module.remote).__name__)
try:
    module.remote[(1,)](None, None, 1, 2, 16)
except RuntimeError as exc:
    print("launch:", exc)
'''


def without_nvshmem(tmp_path: Path, source: str, script: str) -> tuple[list[str], Path]:
    """``script`` run on ``source`` transpiled (its path in ``sys.argv[1]``) in a subprocess without
    TRITON_INTERPRET, NVSHMEM_LIB_DIR naming an empty folder: the lines it printed, and that folder."""
    import subprocess
    import sys

    path = tmp_path / "remote_module.py"
    path.write_bytes(castpile.transpile(source.encode(), str(path)))
    empty = tmp_path / "no-nvshmem"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(NVSHMEM_LIB_DIR=str(empty), TRITON_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "-c", script, str(path)], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.splitlines(), empty


def test_a_module_with_a_remote_kernel_imports_without_the_nvshmem_library(tmp_path):
    """Without TRITON_INTERPRET and without libnvshmem_device.bc (NVSHMEM_LIB_DIR names an empty folder): the
    module imports with every kernel, and the remote kernel's first launch raises torch's error."""
    source = (
        "import triton\nimport triton.language as tl\nfrom castpile import multicast_like\n\n\n"
        "@triton.jit\ndef plain(out):\n    tl.store(out, 1)\n\n\n"
        "@triton.jit\ndef remote(out, table, n, W: tl.constexpr, B: tl.constexpr):\n"
        "    bufs = multicast_like(out, table[:W], shape=(n,), remote='nvshmem')\n"
        "    bufs[tl.arange(0, B)] = 1\n"
    )
    printed, empty = without_nvshmem(tmp_path, source, WITHOUT_LIBRARY)
    assert printed == [
        "imported: JITFunction JITFunction",
        f"launch: NVSHMEM device library not found at specified path: {empty}",
    ]


EARLY_WRAP = r'''
import importlib.util, sys
spec = importlib.util.spec_from_file_location("remote_module", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(module.WRAPPED_AT_THE_TIME, module.second.run.__name__)
before = module.first.run
module._castpile_remote_kernel(module.first)
print("wrapping again changes nothing:", module.first.run is before)
try:
    module.first[(1,)](None, None, 2)
except RuntimeError as exc:
    print("launch:", exc)
'''


def test_module_level_code_after_a_remote_kernel_finds_it_wrapped(tmp_path):
    """The helpers defined early (for module-level code that may launch kernels) wrap the remote kernels
    defined so far; the last lines wrap the others, and the ones wrapped already are left as they are."""
    kernel = ("@triton.jit\ndef {name}(out, table, W: tl.constexpr):\n"
              "    bufs = multicast_like(out, table[:W], remote='nvshmem')\n    bufs[0] = 1\n")
    source = (
        "import triton\nimport triton.language as tl\nfrom castpile import multicast_like\n\n\n"
        + kernel.format(name="first")
        + "\n\nWRAPPED_AT_THE_TIME = getattr(first.run, '__name__')\n\n\n"
        + kernel.format(name="second")
    )
    printed, empty = without_nvshmem(tmp_path, source, EARLY_WRAP)
    assert printed == [
        "run_with_nvshmem run_with_nvshmem",
        "wrapping again changes nothing: True",
        f"launch: NVSHMEM device library not found at specified path: {empty}",
    ]


# -- the GPU proof's kernel (benchmarks/check_nvshmem.py), as checked in -------------------------------------


@pytest.mark.parametrize("w,lws", [(2, 1), (2, 2), (3, 1), (4, 2)])
def test_the_gpu_scripts_all_reduce(w, lws):
    """benchmarks/kernels/generated/nvshmem_kernels_loop.py's all-reduce on W simulated ranks, 2 blocks over 5 tiles,
    twice in a row (the barriers leave the pads zero), against torch's sum of the inputs."""
    generated = import_file(Path(__file__).parents[1] / "benchmarks/kernels/generated/nvshmem_kernels_loop.py",
                            "nvshmem_kernels_loop")
    n, block = 77, 16
    handles = sim.symmetric_empty(w, (n,), torch.float32, local_world_size=lws)
    inputs = [torch.randint(-100, 100, (n,)).float() for _ in range(w)]

    def body(rank):
        h = handles[rank]
        h.tensor.copy_(inputs[rank])
        outs = []
        for _ in range(2):
            out = torch.full((n,), float("nan"))
            generated.all_reduce_remote[(2,)](h.tensor, h.remote_ptrs, h.signal_pad, h.signal_pad_remote_ptrs, out,
                                              rank, n, w, block)
            outs.append(out)
        return outs

    for rank, outs in enumerate(sim.run(body, w, timeout=120)):
        for out in outs:
            assert torch.equal(out, torch.stack(inputs).sum(0)), f"rank {rank}"
    assert all(not h.signal_pad.any() for h in handles)


@pytest.mark.parametrize("w,lws,force", [(2, None, True), (3, 2, False), (4, 1, False)])
def test_the_gpu_scripts_all_gather(w, lws, force):
    """The push all-gather with remote= bindings (stores become puts for remote peers): 2 programs over 3 tiles,
    twice with new rows; every rank ends with every rank's row, pads zero."""
    generated = import_file(Path(__file__).parents[1] / "benchmarks/kernels/generated/nvshmem_kernels_loop.py",
                            "nvshmem_kernels_loop")
    n, block = 37, 16
    handles = sim.symmetric_empty(w, (w, n), torch.float32, local_world_size=lws, force_remote=force)
    calls = [[torch.randint(-100, 100, (n,)).float() for _ in range(w)] for _ in range(2)]

    def body(rank):
        h, got = handles[rank], []
        for rows in calls:
            h.tensor.fill_(float("nan"))
            h.tensor[rank] = rows[rank]
            generated.all_gather_remote[(2,)](h.tensor, h.remote_ptrs, h.signal_pad, h.signal_pad_remote_ptrs, rank,
                                              n, w, block)
            got.append(h.tensor.clone())
        return got

    for rank, got in enumerate(sim.run(body, w, timeout=120)):
        for rows, out in zip(calls, got):
            assert torch.equal(out, torch.stack(rows)), f"rank {rank}"
    assert all(not h.signal_pad.any() for h in handles)


@pytest.mark.parametrize("w,lws,force", [(2, None, True), (3, 2, False), (3, 1, False)])
def test_the_gpu_scripts_fused_rmsnorm(w, lws, force):
    """The fused all-reduce + residual + RMSNorm with remote= bindings on W simulated ranks (3 rows of 24 over 2
    programs, rows padded to 32 lanes): residual exact (integer data), y within one bf16 rounding of fp32 torch."""
    generated = import_file(Path(__file__).parents[1] / "benchmarks/kernels/generated/nvshmem_kernels_loop.py",
                            "nvshmem_kernels_loop")
    m, d, eps = 3, 24, 1e-6
    handles = sim.symmetric_empty(w, (m, d), torch.bfloat16, local_world_size=lws, force_remote=force)
    inputs = [torch.randint(-8, 9, (m, d)).bfloat16() for _ in range(w)]
    residual0 = torch.randint(-8, 9, (m, d)).bfloat16()
    weight = (torch.randint(1, 9, (d,)).float() / 4).bfloat16()
    h_ref = (torch.stack(inputs).float().sum(0) + residual0.float()).bfloat16()
    y_ref = h_ref.float() * torch.rsqrt((h_ref.float() ** 2).mean(-1, keepdim=True) + eps) * weight.float()

    def body(rank):
        h = handles[rank]
        h.tensor.copy_(inputs[rank])
        residual, out = residual0.clone(), torch.full((m, d), float("nan")).bfloat16()
        generated.all_reduce_residual_rmsnorm_remote[(2,)](h.tensor, h.remote_ptrs, h.signal_pad,
                                                           h.signal_pad_remote_ptrs, residual, weight, out, rank, m,
                                                           d, eps, w, 32)
        return residual, out

    for rank, (residual, out) in enumerate(sim.run(body, w, timeout=120)):
        assert torch.equal(residual, h_ref), f"rank {rank}"
        assert ((out.float() - y_ref).abs() <= 2 ** -7 * y_ref.abs() + 1e-30).all(), f"rank {rank}"
    assert all(not h.signal_pad.any() for h in handles)


def test_the_gpu_scripts_forced_remote_mode_runs_gets_and_the_library_on_one_tensor(monkeypatch):
    """``--force-remote`` (every peer reachable, tables tagging them remote): the all-reduce moves every peer's
    bytes through NVSHMEM gets (counted here), and the library's collectives run on the same tensor; both exact."""
    from castpile.gpu import collectives, sim_nvshmem

    generated = import_file(Path(__file__).parents[1] / "benchmarks/kernels/generated/nvshmem_kernels_loop.py",
                            "nvshmem_kernels_loop")
    w, n, block = 2, 40, 16
    handles = sim.symmetric_empty(w, (n,), torch.float32, force_remote=True)
    inputs = [torch.randint(-100, 100, (n,)).float() for _ in range(w)]
    calls = []
    real_get = sim_nvshmem.get
    monkeypatch.setattr(sim_nvshmem, "get", lambda *a, **kw: (calls.append(1), real_get(*a, **kw))[1])

    def body(rank):
        h = handles[rank]
        h.tensor.copy_(inputs[rank])
        out = torch.full((n,), float("nan"))
        generated.all_reduce_remote[(2,)](h.tensor, h.remote_ptrs, h.signal_pad, h.signal_pad_remote_ptrs, out,
                                          rank, n, w, block)
        return out, len(calls), collectives.all_reduce_one_shot(h)

    for rank, (out, gets, library) in enumerate(sim.run(body, w, timeout=120)):
        assert torch.equal(out, torch.stack(inputs).sum(0)) and torch.equal(library, out), f"rank {rank}"
        assert gets >= -(-n // block), f"rank {rank} made {gets} gets: the peer was read with loads"
    assert all(not h.signal_pad.any() for h in handles)


@pytest.mark.parametrize("gpus,per_node,share,error", [
    (0, 1, False, "no CUDA device"),
    (1, 2, False, "2 ranks per node but 1 GPU"),
])
def test_the_benchmarks_refuse_ranks_without_a_gpu_each(monkeypatch, gpus, per_node, share, error):
    """benchmarks/harness.start_ranks: no GPU, or more ranks than GPUs without share_gpus (a gloo group would time
    gloo under NCCL's name), is a clear error before any process group starts."""
    import sys

    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "benchmarks"))
    sys.modules.pop("harness", None)
    harness = import_file(Path(__file__).parents[1] / "benchmarks/harness.py", "harness")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    monkeypatch.setattr(harness.dist, "init_process_group", lambda *a, **k: pytest.fail("a group was started"))
    for name, value in {"RANK": "0", "WORLD_SIZE": str(per_node), "LOCAL_RANK": "0",
                        "LOCAL_WORLD_SIZE": str(per_node)}.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(RuntimeError, match=error):
        harness.start_ranks(share_gpus=share)


def test_the_gpu_scripts_phases_record_failures_and_c_level_output(tmp_path):
    """benchmarks/check_nvshmem.py's bookkeeping, without a GPU: a phase that fails is recorded with its error and
    what was written to file descriptors 1 and 2 (as NVSHMEM's C code writes), and the next phase still runs."""
    script = import_file(Path(__file__).parents[1] / "benchmarks/check_nvshmem.py", "check_nvshmem")
    run = script.Run(tmp_path / "nvshmem.json", 1)
    with run.phase("init", bytes=4):
        os.write(2, b"nvshmem: transport ibgda failed to load\n")
        raise RuntimeError("NVSHMEM initialisation failed")
    with run.phase("next") as entry:
        entry["value"] = 7
    saved = __import__("json").loads((tmp_path / "nvshmem.json.rank1.json").read_text())
    first, second = saved["phases"]
    assert first["status"] == "failed" and first["error"] == "RuntimeError: NVSHMEM initialisation failed"
    assert "transport ibgda failed to load" in first["output"] and first["bytes"] == 4
    assert second == {"phase": "next", "status": "ok", "value": 7, "seconds": second["seconds"]}
    assert "transport ibgda failed to load" in (tmp_path / "nvshmem.json.rank1.log").read_text()
    assert run.failed("init") and not run.failed("next")


def test_the_gpu_scripts_log_keeps_what_a_dying_process_printed(tmp_path):
    """NVSHMEM ends the process from C when its initialisation fails: what it printed must be in the log already."""
    script = import_file(Path(__file__).parents[1] / "benchmarks/check_nvshmem.py", "check_nvshmem")
    pid = os.fork()
    if pid == 0:  # the child dies inside the phase, as nvshmem_init's exit(-1) does
        try:
            with script.Run(tmp_path / "nvshmem.json", 0).phase("allocate"):
                os.write(2, b"NVSHMEM: ibgda: no usable device\n")
                os._exit(255)
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 255
    assert "ibgda: no usable device" in (tmp_path / "nvshmem.json.rank0.log").read_text()
