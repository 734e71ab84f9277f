"""Language v1.2's peer forms against torch: one peer ``table[r]`` (P = ()), ``ptr_mask=`` on table slices,
a dtype as the example; their errors; the same forms on ``remote="nvshmem"`` bindings; sm_90 compiles.

tests/kernels_v12_peers.py is transpiled once per strategy.  Kernels without flags run in this process with
a ``rank`` argument (W host tensors stand in for W GPUs); kernels with flags run in W forked simulated ranks
(castpile.gpu.sim) under a timeout.
"""

import ast
import textwrap
from pathlib import Path

import pytest
import torch

import castpile
from castpile.gpu import sim
from compile_sm90 import Job, compile_for_sm90, signature
from testkit import address_table, padded, transpiled, transpiled_module
from testkit.remote import remote_source, symmetric

KERNELS = Path(__file__).with_name("kernels_v12_peers.py")
WORLDS = [2, 3, 4]


@pytest.fixture(scope="module", params=castpile.STRATEGIES)
def k(request, tmp_path_factory):
    return transpiled_module(KERNELS, request.param, tmp_path_factory.mktemp(request.param))


def ints(w, n, seed, low=-20, high=20):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(low, high, (n,), generator=g, dtype=torch.int32) for _ in range(w)]


def shared_copies(tensors):
    """``tensors`` copied into shared memory (forked ranks see them at the same addresses)."""
    out = []
    for t in tensors:
        s = sim.shared_empty(t.shape, t.dtype)
        s.copy_(t)
        out.append(s)
    return out


# -- one peer at a run-time or constexpr rank: P = () ----------------------------------------------


@pytest.mark.parametrize("w", WORLDS)
def test_the_next_peer_alone(k, w):
    n, block = 10, 16
    for rank in range(w):
        bufs = [b.float() for b in ints(w, n, seed=rank + 10 * w)]
        before = [b.clone() for b in bufs]
        res = torch.full((2 * block + 3,), 99.0)
        k.next_peer[(1,)](res, address_table(bufs), rank, n, w, block)
        peer = before[(rank + 1) % w]
        i = torch.arange(block)
        row = torch.cat([peer, torch.zeros(block - n)])
        assert torch.equal(res[:block], row)
        assert torch.equal(res[block : 2 * block], torch.where(i < 3, row, -1.0))
        assert res[2 * block].item() == peer.sum().item()  # an ordinary reduction: over the elements
        assert res[2 * block + 1].item() == peer.max().item()
        assert res[2 * block + 2].item() == peer[n - 1].item()
        for j, (b, old) in enumerate(zip(bufs, before)):
            assert torch.equal(b, old + 1 if j == (rank + 1) % w else old), (rank, j)


@pytest.mark.parametrize("w", WORLDS)
def test_a_constexpr_peer_stores_and_atomics(k, w):
    n, block = 12, 16
    r = w - 1
    bufs = ints(w, n, seed=w)
    before = [b.clone() for b in bufs]
    res = torch.full((block + 1,), -7, dtype=torch.int32)
    k.constexpr_peer[(1,)](res, address_table(bufs), n, r, block)
    ref = before[r].clone()
    ref[:4] = torch.arange(4, dtype=torch.int32) * 10
    expected = torch.zeros(block + 1, dtype=torch.int32)
    expected[:n] = ref
    ref += 1
    expected[block] = ref[1]
    if ref[1] == 11:
        ref[1] = 99
    ref = torch.maximum(ref, torch.tensor(25, dtype=torch.int32))
    assert torch.equal(res, expected)
    for j, (b, old) in enumerate(zip(bufs, before)):
        assert torch.equal(b, ref if j == r else old), j


@pytest.mark.parametrize("w", WORLDS)
def test_a_named_peer_is_the_same_peer(k, w):
    n, block = 6, 8
    rank = 1
    bufs = [b.float() for b in ints(w, n, seed=3 * w)]
    before = [b.clone() for b in bufs]
    res = torch.full((block,), 99.0)
    k.named_peer[(1,)](res, address_table(bufs), rank, n, block)
    assert torch.equal(res, torch.cat([before[rank] * 2, torch.zeros(block - n)]))
    for j, (b, old) in enumerate(zip(bufs, before)):
        assert torch.equal(b, torch.arange(n, dtype=torch.float32) + 5 if j == rank else old), j


def run_ranks(w, kernel, flags_len, extra=()):
    """``kernel(flags, table, rank, w, *extra)`` on every rank at once over shared zeroed flags; the flags after."""
    flags = shared_copies([torch.zeros(flags_len, dtype=torch.int32) for _ in range(w)])
    table = address_table(flags)
    sim.run(lambda rank: kernel[(1,)](flags[rank], table, rank, w, *extra), w, timeout=60)
    return [f.tolist() for f in flags]


@pytest.mark.parametrize("w", WORLDS)
def test_a_ring_handshake_through_one_peer_each(k, w):
    # each rank raised slot `rank` of the next rank's flags; the next rank waited on it and reset it
    assert run_ranks(w, k.ring_flags, w) == [[0] * w] * w


# -- ptr_mask= on table slices ----------------------------------------------------------------------


@pytest.mark.parametrize("w", WORLDS)
def test_every_buffer_but_this_ranks(k, w):
    n, block = 7, 8
    wp = padded(w)
    for rank in range(w):
        bufs = ints(w, n, seed=rank + 5 * w)
        before = [b.clone() for b in bufs]
        res = torch.full(((wp + 2) * block,), 99, dtype=torch.int32)
        k.others[(1,)](res, address_table(bufs), rank, n, w, wp, block)
        stack = torch.zeros(wp, block, dtype=torch.int32)  # masked-off and padded entries load 0
        for j in range(w):
            if j != rank:
                stack[j, :n] = before[j]
        valid = torch.stack([b for j, b in enumerate(before) if j != rank])
        assert torch.equal(res[: wp * block].view(wp, block), stack)
        assert torch.equal(res[wp * block : (wp + 1) * block][:n], valid.sum(0, dtype=torch.int32))
        assert torch.equal(res[(wp + 1) * block :][:n], valid.amax(0))
        assert torch.equal(res[wp * block + n : (wp + 1) * block], torch.zeros(block - n, dtype=torch.int32))
        for j, (b, old) in enumerate(zip(bufs, before)):
            want = old if j == rank else torch.full((n,), rank + 100, dtype=torch.int32)
            if j != rank:
                want[:2] += 1
            assert torch.equal(b, want), (rank, j)


@pytest.mark.parametrize("w", WORLDS)
def test_a_named_slice_with_a_named_mask(k, w):
    block, lo = 4, 1
    wp = padded(w)
    for rank in range(w + 1):
        bufs = [torch.full((block,), 0, dtype=torch.int32), *ints(w, block, seed=rank + w, low=0, high=40)]
        before = [b.clone() for b in bufs]
        res = torch.full((2 * block,), -7, dtype=torch.int32)
        k.named_slice_with_mask[(1,)](res, address_table(bufs), rank, lo, w, wp, block)
        below = before[lo : lo + min(rank, w)]
        i = torch.arange(block)
        # no valid buffer: 0
        minimum = torch.where(i < 3, torch.stack(below).amin(0), 50) if below else torch.zeros(block, dtype=torch.int32)
        assert torch.equal(res[:block], minimum.to(torch.int32))
        assert torch.equal(res[block:], sum(below, torch.zeros(block, dtype=torch.int32)))
        for j, (b, old) in enumerate(zip(bufs, before)):
            touched = lo <= j < lo + min(rank, w)
            assert torch.equal(b, torch.arange(block, dtype=torch.int32) if touched else old), (rank, j)


@pytest.mark.parametrize("w", WORLDS)
def test_notify_every_other_rank(k, w):
    # each rank raised slot `rank` in the others' flags and waited on (and reset) the w - 1 slots in its own
    assert run_ranks(w, k.notify_others, padded(w), (padded(w),)) == [[0] * padded(w)] * w


MASK_OF_AN_EXTENT = """\
import triton
import triton.language as tl
from castpile import multicast_like


@triton.jit
def k(res, table, W: tl.constexpr, M: tl.constexpr):
    bufs = multicast_like(res, table[:W], ptr_mask=tl.arange(0, M) < 2)
    offs = tl.arange(0, 4)
    tl.store(res + offs, tl.sum(bufs[offs], axis=0))
"""
WRONG_EXTENT = "ptr_mask= must be a boolean scalar or a boolean tensor of the slice"


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
def test_a_slice_ptr_mask_of_another_extent_fails_when_triton_compiles_it(tmp_path, strategy):
    module = transpiled(tmp_path, MASK_OF_AN_EXTENT, f"mask_extent_{strategy}", strategy=strategy)
    bufs = ints(3, 4, seed=1)
    res = torch.zeros(4, dtype=torch.int32)
    module.k[(1,)](res, address_table(bufs), 3, 4)  # the padded extent of 3: buffers 0 and 1
    assert torch.equal(res, bufs[0] + bufs[1])
    with pytest.raises(Exception, match=WRONG_EXTENT):
        module.k[(1,)](res, address_table(bufs), 3, 8)
    path = tmp_path / f"mask_extent_{strategy}.py"
    sig = {"res": "*i32", "table": "*i64", "W": "constexpr", "M": "constexpr"}
    results = compile_for_sm90([Job(path, "k", sig, {"W": 3, "M": m}, name=f"M={m}") for m in (4, 8)], tmp_path)
    assert results["M=4"].ok, results["M=4"].error
    assert not results["M=8"].ok and WRONG_EXTENT in results["M=8"].error


# -- a dtype as the example -------------------------------------------------------------------------


@pytest.mark.parametrize("w", WORLDS)
def test_bf16_buffers_named_by_their_dtype(k, w):
    n, block = 5, 8
    bufs = [(torch.arange(n) * (j + 1) / 4).to(torch.bfloat16) for j in range(w)]
    res = torch.full((block,), 99.0)
    k.bf16_by_dtype[(1,)](res, address_table(bufs), n, w, block)
    want = torch.zeros(block)
    want[:n] = torch.stack([b.float() for b in bufs]).sum(0)
    assert torch.equal(res, want)


@pytest.mark.parametrize("w", WORLDS)
def test_int32_buffers_named_by_their_dtype_compare_and_swap(k, w):
    n, block, rank = 6, 8, w - 1
    bufs = [torch.where(torch.arange(n) % 2 == j % 2, torch.arange(n), -5).to(torch.int32) for j in range(w)]
    before = [b.clone() for b in bufs]
    table = address_table(bufs)
    table_before = table.clone()
    wp = padded(w)
    res = torch.full(((wp + 1) * block,), -7, dtype=torch.int32)
    k.int32_by_dtype[(1,)](res, table, rank, n, w, block)
    i = torch.arange(n, dtype=torch.int32)
    olds = torch.zeros(wp, block, dtype=torch.int32)
    after = []
    for j, old in enumerate(before):
        olds[j, :n] = old
        after.append(torch.where(old == i, i + 40, old))
    assert torch.equal(res[: wp * block].view(wp, block), olds)
    assert torch.equal(res[wp * block :][:n], after[rank])
    after[rank] = torch.where(after[rank] == i + 40, -1, after[rank])
    for j, b in enumerate(bufs):
        assert torch.equal(b, after[j]), j
    assert torch.equal(table, table_before)  # masked-off lanes swapped a value for itself there


def test_a_rank0_tile_with_a_dtype_example(k):
    n, block = 3, 4
    bufs = [torch.arange(n, dtype=torch.float32) + 10 * j for j in range(3)]
    res = torch.full((block,), 99.0)
    k.float32_tile_by_dtype[(1,)](res, address_table(bufs), 2, n, block)
    assert torch.equal(res, torch.tensor([21.0, 22.0, 23.0, 1.0]))  # the lane out of bounds loads 0
    assert torch.equal(bufs[2], torch.full((n,), 3.5))


# -- errors -----------------------------------------------------------------------------------------

HEADER = """\
import triton
import triton.language as tl
from castpile import multicast_like
import castpile


@triton.jit
def k(out, table, rank, n, W: tl.constexpr, WP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
"""


def errors(body: str) -> list[tuple[int, int, str, dict]]:
    """``(line, col, id, params)`` of each diagnostic (the ids: castpile.compiler.diagnostics)."""
    source = HEADER + textwrap.indent(textwrap.dedent(body), "    ")
    with pytest.raises(castpile.TranspileError) as info:
        castpile.transpile(source.encode(), "k.py")
    return [(d.line, d.col, d.id, d.params) for d in info.value.diagnostics]


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(
            "ranks = tl.arange(0, W)\nbufs = multicast_like(out, table[:W])\nx = tl.load(bufs[offs], mask=ranks <= rank)\n",
            id="an arange of the slice's extent",
        ),
        pytest.param(
            "bufs = multicast_like(out, table[:W], ptr_mask=tl.arange(0, WP) != rank)\n"
            "tl.store(bufs[offs], 1, mask=tl.arange(0, WP) != rank)\n",
            id="the ptr_mask's arange",
        ),
        pytest.param(
            "ranks = tl.arange(0, WP)\nptrs = tl.load(table + ranks)\nbufs = multicast_like(out, ptrs)\n"
            "m = ranks < W\ntl.atomic_add(bufs[offs], 1, mask=m)\n",
            id="the tensor tile's arange, through a name",
        ),
        pytest.param(
            "bufs = multicast_like(out, table[:3])\ncastpile.signal(bufs[0], mask=tl.arange(0, 4) != rank)\n",
            id="a literal extent, padded",
        ),
        pytest.param(
            "bufs = multicast_like(out, table[:W])\ntl.sum(tl.load(bufs[offs], mask=tl.arange(0, W) < rank), axis=0)\n",
            id="a reduction's load",
        ),
    ],
)
def test_an_access_mask_with_one_flag_per_buffer_names_ptr_mask(body):
    lines = (HEADER + textwrap.indent(body, "    ")).splitlines()
    line = next(n for n, text in enumerate(lines, 1) if "mask=" in text and "multicast_like" not in text)
    col = lines[line - 1].index("mask=") + len("mask=") + 1
    [(got_line, got_col, id, params)] = errors(body)
    assert (got_line, got_col, id) == (line, col, "E411"), (got_line, got_col, id, params)


def test_an_element_mask_over_an_index_of_the_same_extent_is_not_an_error():
    source = HEADER + textwrap.indent(
        "bufs = multicast_like(out, table[:W], ptr_mask=tl.arange(0, WP) != rank)\n"
        "slots = tl.arange(0, WP)\ntl.store(bufs[slots], 1, mask=slots != rank)\n",
        "    ",
    )
    castpile.transpile(source.encode(), "k.py")


@pytest.mark.parametrize(
    "body,id,params",
    [
        pytest.param("one = multicast_like(out, table[rank, 0])\n", "E116", {}, id="two indices"),
        pytest.param("one = multicast_like(out, table[1.5])\n", "E117", {"code": "1.5"}, id="a float"),
        pytest.param("one = multicast_like(out, table[...])\n", "E117", {"code": "..."}, id="an ellipsis"),
        pytest.param("one = multicast_like(tl.pointer_type(tl.int32), table[:W])\n", "E115", {}, id="a pointer type"),
        pytest.param(
            "one = multicast_like(tl.int32, tl.load(table + rank))\ntl.atomic_cas(one[0], 0, 1)\n",
            "E412",
            {"what": "tl.atomic_cas", "name": "one"},
            id="a dtype and a tensor tile: compare-and-swap",
        ),
        pytest.param(
            "one = multicast_like(tl.int32, tl.load(table + rank))\ncastpile.signal(one[0], wait_for=0)\n",
            "E412",
            {"what": "castpile.signal with wait_for=", "name": "one"},
            id="a dtype and a tensor tile: signal wait_for",
        ),
    ],
)
def test_peer_and_dtype_errors(body, id, params):
    [(_, _, got, got_params)] = errors(body)
    assert (got, got_params) == (id, params)


# -- remote="nvshmem": the same forms, every other peer remote ----------------------------------------

REMOTE_KERNELS = {"next_peer", "named_peer", "ring_flags", "others", "notify_others", "bf16_by_dtype"}
REMOTE_STORES = {"others": "atomic_add"}  # a kernel's atomics, which remote= refuses, are left out


def remote_kernels() -> str:
    tree = ast.parse(remote_source(KERNELS, drop=set(COMPILES) - REMOTE_KERNELS))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in REMOTE_STORES:
            node.body = [s for s in node.body if REMOTE_STORES[node.name] not in ast.unparse(s)]
    return ast.unparse(tree) + "\n"


@pytest.fixture(scope="module")
def remote(tmp_path_factory):
    return transpiled(tmp_path_factory.mktemp("remote"), remote_kernels(), "kernels_v12_peers_remote")


@pytest.mark.parametrize("w", WORLDS)
def test_remote_next_peer_and_others(remote, w):
    n, block = 7, 8
    wp = padded(w)
    rank = 0
    data = [b.float() for b in ints(w, n, seed=w)]
    s = symmetric(w, 1, n, torch.float32, data)

    def body(me):
        if me != rank:
            return None
        res = torch.full((2 * block + 3,), 99.0)
        remote.next_peer[(1,)](res, s[me].remote_ptrs, me, n, w, block)
        stack = torch.full(((wp + 2) * block,), 99.0)
        remote.others[(1,)](stack, s[me].remote_ptrs, me, n, w, wp, block)
        return res, stack

    res, stack = sim.run(body, w, timeout=60)[rank]
    peer = data[(rank + 1) % w]
    assert torch.equal(res[:n], peer) and res[2 * block].item() == peer.sum().item()
    assert torch.equal(s[(rank + 1) % w].tensor, torch.full((n,), rank + 100.0))  # others stored after next_peer's +1
    rows = stack[: wp * block].view(wp, block)
    assert torch.equal(rows[rank], torch.zeros(block)) and torch.equal(rows[1, :n], peer + 1)
    assert torch.equal(
        stack[wp * block :][:n], torch.stack([d + (j == 1) for j, d in enumerate(data) if j != rank]).sum(0)
    )
    assert torch.equal(s[rank].tensor, data[rank])


@pytest.mark.parametrize("w", WORLDS)
def test_remote_flags_through_one_peer_and_a_masked_slice(remote, w):
    for kernel, length in ((remote.ring_flags, w), (remote.notify_others, padded(w))):
        s = symmetric(w, 1, length, torch.int32, [torch.zeros(length, dtype=torch.int32)] * w)
        extra = () if kernel is remote.ring_flags else (padded(w),)
        sim.run(lambda me: kernel[(1,)](s[me].tensor, s[me].remote_ptrs, me, w, *extra), w, timeout=60)
        assert [x.tensor.tolist() for x in s] == [[0] * length] * w


# -- every kernel compiles for sm_90 ----------------------------------------------------------------

# kernel: (the buffers' element type, [constexprs of each compile]); the signature is read from the kernel.
COMPILES = {
    "next_peer": ("fp32", [{"W": 3, "BLOCK": 16}]),
    "constexpr_peer": ("i32", [{"R": 1, "BLOCK": 16}]),
    "named_peer": ("fp32", [{"BLOCK": 8}]),
    "ring_flags": ("i32", [{"W": 3}]),
    "others": ("i32", [{"W": 3, "WP": 4, "BLOCK": 8}, {"W": 4, "WP": 4, "BLOCK": 8}]),
    "named_slice_with_mask": ("i32", [{"LO": 1, "W": 3, "WP": 4, "BLOCK": 4}]),
    "notify_others": ("i32", [{"W": 3, "WP": 4}]),
    "bf16_by_dtype": ("fp32", [{"W": 3, "BLOCK": 8}]),
    "int32_by_dtype": ("i32", [{"W": 3, "BLOCK": 8}]),
    "float32_tile_by_dtype": ("fp32", [{"BLOCK": 4}]),
}


def jobs_for(module: Path, source: str, kernels, nvshmem=False) -> list[Job]:
    jobs = []
    for kernel in sorted(kernels):
        dtype, variants = COMPILES[kernel]
        types = {"table": "*i64", "flags": "*i32", "res": f"*{dtype}"}
        jobs += [
            Job(
                module,
                kernel,
                signature(source, kernel, types),
                constexprs,
                nvshmem=nvshmem,
                name=f"{kernel} {constexprs}{' remote' if nvshmem else ''}",
            )
            for constexprs in variants
        ]
    return jobs


def test_every_kernel_of_the_file_has_compiles():
    tree = ast.parse(KERNELS.read_text())
    assert sorted(COMPILES) == sorted(node.name for node in tree.body if isinstance(node, ast.FunctionDef))


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
def test_every_kernel_compiles_for_sm90(tmp_path, strategy):
    module = tmp_path / f"kernels_v12_peers_{strategy}.py"
    module.write_bytes(castpile.transpile(KERNELS.read_bytes(), str(KERNELS), strategy=strategy))
    jobs = jobs_for(module, KERNELS.read_text(), COMPILES)
    if strategy == "loop":  # remote bindings lower the same under both strategies
        remote = tmp_path / "kernels_v12_peers_remote.py"
        source = remote_kernels()
        remote.write_bytes(castpile.transpile(source.encode(), str(remote)))
        jobs += jobs_for(remote, source, REMOTE_KERNELS, nvshmem=True)
    results = compile_for_sm90(jobs, tmp_path)
    failures = {name: r.error for name, r in results.items() if not r.ok}
    assert not failures, "\n\n".join(f"{name}:\n{error}" for name, error in failures.items())
