"""Symmetric-memory backends without GPUs: the choice of backend, its errors, and which peers are reachable.

The reachability rule (a peer is load/store reachable exactly where torch gives it a
non-zero address), the layout it is expected to follow (one NVLink domain per node),
the errors on a machine without NVSHMEM, and the simulator's remote peers.
"""

import pytest
import torch
import triton
import triton.language as tl
from torch.distributed import _symmetric_memory as symm_mem

from castpile.gpu import backends, runtime, sim, symmetric


class FakeSymmMem:
    """A stand-in for torch.distributed._symmetric_memory: records set_backend, refuses a change after use."""

    def __init__(self, available=True, current="CUDA", in_use=False):
        self.available, self.current, self.in_use, self.calls = available, current, in_use, []

    def is_nvshmem_available(self):
        return self.available

    def get_backend(self, device):
        assert torch.device(device).type == "cuda"
        return self.current

    def set_backend(self, name):
        self.calls.append(name)
        if self.in_use and name != self.current:
            raise RuntimeError("Backend can not be changed after use.")
        self.current = name


# --- choosing the backend -------------------------------------------------------------------------


def test_backend_names_are_checked():
    assert backends.check_backend("cuda") == "cuda"
    assert backends.check_backend("NVSHMEM") == "nvshmem"
    for bad in ("nccl", "gloo", "", None, 1):
        with pytest.raises(ValueError, match="choose one of 'cuda', 'nvshmem'"):
            backends.check_backend(bad)


def test_an_unknown_backend_is_refused_before_anything_else():
    with pytest.raises(runtime.SymmetricMemoryError, match="backend='ucx': choose one of"):
        runtime.symmetric_empty((4,), torch.float32, backend="ucx")
    with pytest.raises(runtime.SymmetricMemoryError, match="backend='ucx': choose one of"):
        runtime.symmetric_scratch((4,), torch.float32, backend="ucx")


@pytest.mark.skipif(symm_mem.is_nvshmem_available(), reason="NVSHMEM is available here")
@pytest.mark.parametrize("allocate", [runtime.symmetric_empty, runtime.symmetric_scratch])
def test_without_nvshmem_the_error_says_what_is_missing(allocate):
    with pytest.raises(runtime.SymmetricMemoryError) as info:
        allocate((4,), torch.float32, backend="nvshmem")
    text = str(info.value)
    assert text.startswith(
        "NVSHMEM is not available: torch.distributed._symmetric_memory.is_nvshmem_available() is False"
    )
    assert f"torch {torch.__version__}" in text and "nvidia-nvshmem-cu" in text and "libnvshmem_host" in text
    # the default backend still reaches the process-group check, as before
    with pytest.raises(runtime.SymmetricMemoryError, match="torchrun --nproc_per_node"):
        allocate((4,), torch.float32)


def test_nvshmem_problems_in_order():
    class Old:
        pass

    assert "no symmetric-memory backend selection" in backends.nvshmem_problem(Old(), cuda_available=True)
    assert backends.nvshmem_problem(FakeSymmMem(available=False), True).startswith("NVSHMEM is not available")
    assert "no CUDA device" in backends.nvshmem_problem(FakeSymmMem(), cuda_available=False)
    assert backends.nvshmem_problem(FakeSymmMem(), cuda_available=True) is None


def test_select_sets_torchs_backend_only_when_it_differs(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    fake = FakeSymmMem(current="CUDA")
    assert backends.select("cuda", None, fake) == "cuda" and fake.calls == []
    assert backends.select("nvshmem", "cuda:0", fake) == "nvshmem" and fake.calls == ["NVSHMEM"]
    assert backends.select("NVSHMEM", "cuda:0", fake) == "nvshmem" and fake.calls == ["NVSHMEM"]
    # torch not told yet (get_backend None) means its default, CUDA: nothing to set
    fresh = FakeSymmMem(current=None)
    assert backends.select("cuda", "cuda:1", fresh) == "cuda" and fresh.calls == []


def test_one_backend_per_process(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    fake = FakeSymmMem(current="CUDA", in_use=True)
    with pytest.raises(RuntimeError) as info:
        backends.select("nvshmem", "cuda:0", fake)
    text = str(info.value)
    assert "already allocates symmetric memory on 'cuda'" in text and "same backend=" in text
    assert "Backend can not be changed after use" in text
    fake = FakeSymmMem(current="NVSHMEM", in_use=True)
    with pytest.raises(RuntimeError, match="already allocates symmetric memory on 'nvshmem'"):
        backends.select("cuda", "cuda:0", fake)


def test_select_refuses_nvshmem_where_it_is_missing(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    fake = FakeSymmMem(available=False)
    with pytest.raises(RuntimeError, match="NVSHMEM is not available"):
        backends.select("nvshmem", "cuda:0", fake)
    assert fake.calls == []  # torch's backend is left alone


def test_torch_names_map_back():
    assert [backends.castpile_name(n) for n in ("CUDA", "NVSHMEM", None, "NCCL")] == ["cuda", "nvshmem", "cuda", "nccl"]


# --- reachability -----------------------------------------------------------------------------------


def test_reachable_where_the_address_is_not_zero():
    assert backends.reachable_from_ptrs([0x1000, 0x2000], 0) == (True, True)
    assert backends.reachable_from_ptrs(torch.tensor([0, 0x2000, 0]), 1) == (False, True, False)
    with pytest.raises(ValueError, match="rank 0's own buffer has no address"):
        backends.reachable_from_ptrs([0, 0x2000], 0)
    with pytest.raises(ValueError):
        backends.reachable_from_ptrs([0x2000], 1)


def test_two_nodes_of_eight():
    world = range(16)
    for me in world:
        row = backends.node_reachability(world, me, 8)
        assert [r for r, ok in enumerate(row) if ok] == list(range(me // 8 * 8, me // 8 * 8 + 8))
        alone = backends.node_reachability(world, me, 8, p2p=False)
        assert [r for r, ok in enumerate(alone) if ok] == [me]
    # one node: everyone is reachable, as on the CUDA backend
    assert backends.node_reachability(range(8), 5, 8) == (True,) * 8


def test_groups_use_global_ranks():
    # a group of global ranks 6, 7, 8, 9 straddles the two nodes: group rank 1 (global 7) reaches 6 and 7
    assert backends.node_reachability([6, 7, 8, 9], 1, 8) == (True, True, False, False)
    assert backends.node_reachability([6, 7, 8, 9], 2, 8) == (False, False, True, True)
    with pytest.raises(ValueError, match="distinct"):
        backends.node_reachability([1, 1], 0, 8)
    with pytest.raises(ValueError, match="at least 1"):
        backends.node_reachability([0, 1], 0, 0)
    with pytest.raises(ValueError, match="not in a group of 2"):
        backends.node_reachability([0, 1], 2, 8)


def test_local_world_size_from_torchrun(monkeypatch):
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    assert backends.local_world_size() == 8
    monkeypatch.delenv("LOCAL_WORLD_SIZE")
    assert backends.local_world_size(4) == 4
    with pytest.raises(RuntimeError, match="LOCAL_WORLD_SIZE is not set"):
        backends.local_world_size()


def test_symmetric_tensor_defaults_and_checks():
    handles = sim.symmetric_empty(3, (4,), torch.float32)
    h = handles[1]
    assert h.reachable == (True, True, True) and h.pes == (0, 1, 2) and h.backend == "cuda" and h.all_reachable
    fields = dict(
        tensor=h.tensor,
        buffer_ptrs=h.buffer_ptrs,
        signal_pad=h.signal_pad,
        signal_pad_ptrs=h.signal_pad_ptrs,
        rank=1,
        world_size=3,
        max_blocks=1,
    )
    with pytest.raises(symmetric.SymmetricMemoryError, match="reachable has 2 entries for 3 ranks"):
        symmetric.SymmetricTensor(**fields, reachability=symmetric.Reachability((True, True)))
    with pytest.raises(symmetric.SymmetricMemoryError, match="rank 1's own buffer is marked unreachable"):
        symmetric.SymmetricTensor(**fields, reachability=symmetric.Reachability((True, False, True)))
    assert not symmetric.SymmetricTensor(
        **fields, reachability=symmetric.Reachability([True, True, False])
    ).all_reachable
    with pytest.raises(symmetric.SymmetricMemoryError, match="pes has 2 entries for 3 ranks"):
        symmetric.Reachability((True, True, True), pes=(0, 1))


# --- the simulator's remote peers ---------------------------------------------------------------------


def test_simulated_nodes_zero_the_remote_addresses():
    handles = sim.symmetric_empty(4, (8,), torch.float32, push_scratch=True, local_world_size=2)
    for h in handles:
        local = [p // 2 == h.rank // 2 for p in range(4)]
        assert h.reachable == tuple(local) and h.backend == "nvshmem" and not h.all_reachable
        for ptrs in (h.buffer_ptrs, h.signal_pad_ptrs, h.low_latency.slots.ptrs, h.push_scratch.ptrs):
            assert [int(p) != 0 for p in ptrs] == local
        assert int(h.buffer_ptrs[h.rank]) == h.tensor.data_ptr()
        assert h.low_latency.slots.reachable == tuple(local)
    assert int(handles[0].buffer_ptrs[1]) == handles[1].tensor.data_ptr()


def test_peer_address_is_the_symmetric_heap():
    handles = sim.symmetric_empty(4, (8,), torch.float32, local_world_size=2)
    mine = handles[0].tensor.data_ptr() + 12  # element 3 of rank 0's copy
    assert sim.peer_address(mine, 3) == handles[3].tensor.data_ptr() + 12
    assert sim.peer_address(handles[2].tensor.data_ptr(), 0) == handles[0].tensor.data_ptr()
    with pytest.raises(ValueError, match="PE 4 is not one of the 4"):
        sim.peer_address(mine, 4)
    with pytest.raises(ValueError, match="not in a simulated symmetric tensor"):
        sim.peer_address(torch.zeros(4).data_ptr(), 0)


@triton.jit
def _reachable_sum(ptrs, out, n, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.float32)
    for p in tl.static_range(WORLD):
        addr = tl.load(ptrs + p)
        if addr != 0:
            acc += tl.load(addr.to(tl.pointer_type(tl.float32)) + offs, mask=offs < n, other=0.0)
    tl.store(out + offs, acc, mask=offs < n)


def test_a_kernel_that_skips_address_zero_sums_its_node():
    world, n = 4, 6
    handles = sim.symmetric_empty(world, (n,), torch.float32, local_world_size=2)
    for h in handles:
        h.tensor.copy_(torch.arange(n, dtype=torch.float32) + 10**h.rank)
    for h in handles:
        out = torch.empty(n)
        _reachable_sum[(1,)](h.buffer_ptrs, out, n, WORLD=world, BLOCK=8)
        node = [p for p in range(world) if h.reachable[p]]
        assert node == [h.rank // 2 * 2, h.rank // 2 * 2 + 1]
        assert torch.equal(out, sum(handles[p].tensor for p in node))


def test_the_modules_docstring_examples_hold():
    import doctest

    failures, attempted = doctest.testmod(backends, verbose=False)
    assert (failures, attempted) == (0, 8)


@pytest.mark.parametrize("current", [None, "CUDA", "NCCL"])
def test_the_default_backend_is_left_as_torch_has_it(current):
    """backend="cuda" never calls set_backend unless NVSHMEM is in use: the runtime behaves as it did on 2 x H200."""
    fake = FakeSymmMem(current=current)
    assert backends.select("cuda", "cuda:0", fake) == "cuda"
    assert fake.calls == []


def test_the_library_refuses_tensors_with_remote_peers():
    """Its kernels load and store every peer's buffer: a remote peer (address 0) would fault; refused first."""
    from castpile.gpu import collectives
    from castpile.gpu.fused import rmsnorm

    symm = sim.symmetric_empty(2, (4, 8), torch.float32, local_world_size=1)[0]
    calls = [
        lambda: collectives.all_reduce(symm),
        lambda: collectives.all_reduce_one_shot(symm),
        lambda: collectives.all_reduce_two_shot(symm),
        lambda: collectives.all_gather(symm),
        lambda: collectives.reduce_scatter(symm),
        lambda: rmsnorm.all_reduce_rmsnorm(symm, torch.ones(8)),
    ]
    refused = r"rank 1 is not load/store reachable from rank 0 \(backend 'nvshmem'; remote ranks \[1\]\)"
    for call in calls:
        with pytest.raises(ValueError, match=refused):
            call()


# --- the remote_ptrs table of remote="nvshmem" kernels -----------------------------------------------------


def test_remote_table_encodes_remote_peers_by_local_address_and_pe():
    words = backends.remote_table(
        [0x5000, 0, 0x7000, 0],
        (True, False, True, False),
        0x5000,
        (8, 9, 10, 11),
        scratch_address=0xA000,
        scratch_bytes=4096,
    )
    assert words[:2] == [0xA000, 4096]
    assert words[2:] == [0x5000, 0x5000 | 10 << 48, 0x7000, 0x5000 | 12 << 48]  # PE 9 and 11: tags 10 and 12
    entry = words[3]
    assert (entry >> 48) - 1 == 9 and entry & ((1 << 48) - 1) == 0x5000  # what the kernel decodes


def test_remote_table_refuses_what_does_not_fit():
    with pytest.raises(ValueError, match="does not fit the 48-bit address"):
        backends.remote_table([1 << 48, 0], (True, False), 1 << 48, (0, 1))
    with pytest.raises(ValueError, match="PE 32767 does not fit"):
        backends.remote_table([0x1000, 0], (True, False), 0x1000, (0, 32767))


@pytest.mark.parametrize("world,lws", [(2, 1), (4, 2), (3, 2)])
def test_the_simulator_publishes_remote_tables(world, lws):
    handles = sim.symmetric_empty(world, (6,), torch.int32, local_world_size=lws)
    for h in handles:
        for table, ptrs, own in (
            (h.remote_ptrs, h.buffer_ptrs, h.tensor),
            (h.signal_pad_remote_ptrs, h.signal_pad_ptrs, h.signal_pad),
        ):
            assert table.dtype == torch.int64 and table.numel() == world
            header = torch.tensor([], dtype=torch.int64).set_(table.untyped_storage())[:2]
            assert header.tolist() == [h.remote_scratch.data_ptr(), sim.SIM_REMOTE_SCRATCH_BYTES]
            for r, (entry, ptr) in enumerate(zip(table.tolist(), ptrs.tolist())):
                if h.reachable[r]:
                    assert entry == ptr != 0
                else:
                    assert ptr == 0 and entry == own.data_ptr() | (r + 1) << 48
                    assert (
                        sim.peer_address(entry & ((1 << 48) - 1), r)
                        == (handles[r].tensor if own is h.tensor else handles[r].signal_pad).data_ptr()
                    )


def test_every_peer_reachable_needs_no_scratch():
    """One NVLink domain: remote_ptrs is buffer_ptrs (after a header naming no scratch), as on the CUDA backend."""
    h = sim.symmetric_empty(3, (4,), torch.float32)[1]
    assert torch.equal(h.remote_ptrs, h.buffer_ptrs) and torch.equal(h.signal_pad_remote_ptrs, h.signal_pad_ptrs)
    assert torch.tensor([], dtype=torch.int64).set_(h.remote_ptrs.untyped_storage())[:2].tolist() == [0, 0]
    assert h.remote_scratch is None


# --- force_remote: the NVSHMEM get/put path between GPUs that could load and store -------------------------


def test_force_remote_keeps_only_the_own_entry_as_an_address():
    assert backends.table_reachability((True, True, True), 1) == (True, True, True)
    assert backends.table_reachability((True, False, True), 0) == (True, False, True)
    assert backends.table_reachability((True, True, True), 1, force_remote=True) == (False, True, False)
    assert backends.table_reachability((True, False), 0, force_remote=True) == (True, False)


@pytest.mark.parametrize("world,lws", [(2, None), (3, None), (4, 2)])
def test_the_simulator_forces_remote_tables_and_keeps_addresses(world, lws):
    """force_remote tags every other rank in the remote_ptrs tables; buffer_ptrs, reachable and the library stay."""
    handles = sim.symmetric_empty(world, (6,), torch.int32, local_world_size=lws, force_remote=True)
    for h in handles:
        assert h.backend == "nvshmem" and h.remote_scratch is not None
        expected = (True,) * world if lws is None else backends.node_reachability(range(world), h.rank, lws)
        assert h.reachable == expected
        assert [p != 0 for p in h.buffer_ptrs.tolist()] == list(expected)
        for table, own in ((h.remote_ptrs, h.tensor), (h.signal_pad_remote_ptrs, h.signal_pad)):
            for r, entry in enumerate(table.tolist()):
                assert entry == (own.data_ptr() if r == h.rank else own.data_ptr() | (r + 1) << 48)


def test_force_remote_needs_the_nvshmem_backend():
    with pytest.raises(ValueError, match="force_remote=True needs backend='nvshmem'"):
        backends.check_force_remote("cuda", True)
    backends.check_force_remote("nvshmem", True)
    backends.check_force_remote("cuda", False)
    for allocate in (runtime.symmetric_empty, runtime.symmetric_scratch):  # before anything collective
        with pytest.raises(ValueError, match="force_remote=True needs backend='nvshmem'"):
            allocate((4,), torch.float32, backend="CUDA", force_remote=True)
