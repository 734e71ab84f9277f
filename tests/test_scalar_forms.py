"""Scalar flags, rank-0 tiles, scalar indices and constexpr or scalar masks: run against torch, and compiled.

tests/kernels_scalar_forms.py is transpiled once per strategy and run in the interpreter at
W = 2 and 3 (W host tensors stand in for W GPUs through a table of their ``data_ptr()``s).
The interpreter runs every scalar as a NumPy array, so forms that only compiling rejects pass
there: every kernel of the file is also compiled for sm_90 under both strategies.  Kernels
that wait run in a forked simulated rank under a timeout, so a wait that ignores its mask
fails instead of hanging the suite.
"""

import ast
from pathlib import Path

import pytest
import torch

import castpile
from castpile.gpu import sim
from compile_sm90 import Job, compile_for_sm90, signature
from testkit import address_table, import_file, padded, transpiled
from testkit.references import ATOMIC_REFS  # the semantic tests' references
from testkit.remote import remote_source, symmetric

KERNELS = Path(__file__).with_name("kernels_scalar_forms.py")
WORLDS = [2, 3]
# How a kernel with EVEN and SCALAR masks its calls: (EVEN, SCALAR, live) and whether the lanes are on.
MASKS = {
    "constexpr_true": (True, False, 0, True),
    "constexpr_false": (False, False, 0, False),
    "scalar_true": (False, True, 1, True),
    "scalar_false": (True, True, 0, False),
}


@pytest.fixture(scope="module", params=castpile.STRATEGIES)
def k(request, tmp_path_factory):
    """The transpiled kernels module for one strategy."""
    out = tmp_path_factory.mktemp(request.param) / f"kernels_scalar_forms_{request.param}.py"
    out.write_bytes(castpile.transpile(KERNELS.read_bytes(), str(KERNELS), strategy=request.param))
    return import_file(out)


def ints(w, n, seed, high=12):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, high, (n,), generator=g, dtype=torch.int32) for _ in range(w)]


def in_one_rank(body):
    """``body()`` in a forked simulated rank under a timeout (a wait that never returns fails the test)."""
    [result] = sim.run(lambda rank: body(), 1, timeout=60)
    return result


# -- scalar flags and constexpr masks on plain pointers ---------------------------------------


def test_wait_on_scalar_flags(k):
    n, live = 4, 2

    def body():
        flags = torch.tensor([3] * n + [3] * live + [9] * (n - live), dtype=torch.int32)
        k.wait_scalar_flags[(n,)](flags, live, 3, 1, n)
        return flags

    assert in_one_rank(body).tolist() == [1] * n + [1] * live + [9] * (n - live)


@pytest.mark.parametrize("even", [True, False])
def test_wait_with_a_constexpr_mask(k, even):
    block = 4

    def body():
        flags = torch.zeros(block + 1, dtype=torch.int32)
        k.wait_constexpr_mask[(1,)](flags, even, block)
        return flags

    assert in_one_rank(body).tolist() == ([5] * block + [6] if even else [0] * (block + 1))


# -- a table binding, masks that are constexprs or scalar tensors -------------------------------


def check_masked_loads_and_stores(w, mask, launch):
    """``table_masked_loads`` with ``MASKS[mask]`` against torch.  ``launch(out, bufs, args)`` runs it with
    buffers holding ``bufs`` (``args``: the arguments after the table); it returns ``out`` and the buffers after."""
    even, scalar, live, on = MASKS[mask]
    n, block = 10, 16
    bufs = [b.float() for b in ints(w, n, seed=w)]
    out, after = launch(torch.full((padded(w), block), 99.0), bufs, (n, live, w, even, scalar, block))
    expected = torch.full((padded(w), block), -1.0)
    if on:
        expected[:w, :n] = torch.stack(bufs)
    assert torch.equal(out, expected)
    for j, (b, old) in enumerate(zip(after, bufs)):
        assert torch.equal(b, old + 100 if on else old), f"buffer {j}"


def check_masked_flags(w, mask, launch):
    """``table_masked_flags`` with ``MASKS[mask]``: ``launch(start, args)`` runs it over pads holding ``start``
    (``args``: the arguments after the table) and returns the pads after."""
    even, scalar, live, on = MASKS[mask]
    start = torch.tensor([0, 0, 0, 4, 0, 0], dtype=torch.int32)
    pads = launch(start, (live, w, even, scalar, 2))
    assert [p.tolist() for p in pads] == [[0, 5, 0, 6, 0, 0] if on else start.tolist()] * w


@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("w", WORLDS)
def test_table_loads_and_stores_with_scalar_masks(k, w, mask):
    def launch(out, bufs, args):
        bufs = [b.clone() for b in bufs]
        k.table_masked_loads[(1,)](out, address_table(bufs), *args)
        return out, bufs

    check_masked_loads_and_stores(w, mask, launch)


@pytest.mark.parametrize(
    "op,mask",
    [(op, "constexpr_true") for op in ATOMIC_REFS]
    + [("add", "constexpr_false"), ("add", "scalar_true"), ("add", "scalar_false")],
)
@pytest.mark.parametrize("w", WORLDS)
def test_table_atomics_with_scalar_masks(k, w, op, mask):
    even, scalar, live, on = MASKS[mask]
    n, block = 9, 16
    bufs = ints(w, n + 1, seed=10 + w)
    before = [b.clone() for b in bufs]
    out = torch.full((padded(w), block), -7, dtype=torch.int32)
    k.table_masked_atomics[(1,)](out, address_table(bufs), n, live, op, w, even, scalar, block)
    v = torch.arange(n, dtype=torch.int32) + 3
    expected = torch.zeros((padded(w), block), dtype=torch.int32)  # masked-off old values are 0
    for j, (b, old) in enumerate(zip(bufs, before)):
        ref = old.clone()
        if on:
            ref[:n] = ATOMIC_REFS[op](old[:n], v)
            expected[j, :n] = old[:n]
        assert torch.equal(b, ref), f"buffer {j}"
    assert torch.equal(out, expected)


@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("w", WORLDS)
def test_table_signal_and_wait_with_scalar_masks(k, w, mask):
    def launch(start, args):
        def body():
            pads = [start.clone() for _ in range(w)]
            k.table_masked_flags[(1,)](pads[0], address_table(pads), *args)
            return pads

        return in_one_rank(body)

    check_masked_flags(w, mask, launch)


# -- one buffer (a rank-0 tile): P = (), and P + I = () at a scalar index -----------------------


@pytest.mark.parametrize("even", [True, False])
@pytest.mark.parametrize("at", [3, 12], ids=["k_in_bounds", "k_out_of_bounds"])
@pytest.mark.parametrize("w", WORLDS)
def test_one_peer_loads(k, w, at, even):
    n, m, block = 10, 6, 16
    bufs = [b.float() for b in ints(w, n, seed=20 + w)]
    peer = w - 1
    b = bufs[peer]
    out = torch.full((3 * block + 4,), 99.0)
    k.one_peer_loads[(1,)](out, address_table(bufs), peer, n, m, at, even, block)
    i = torch.arange(block)
    padded = torch.cat([b, torch.zeros(block - n)])
    assert torch.equal(out[:block], torch.where(i < n, padded, 0.0))
    assert torch.equal(out[block : 2 * block], torch.where(i < m, padded, -1.0))
    assert torch.equal(out[2 * block : 3 * block], torch.where((i < n) & even, padded, -2.0))
    at_k = b[at].item() if at < n else None
    assert out[3 * block :].tolist() == [
        at_k if at_k is not None else 0.0,
        at_k if at_k is not None and at < m else -1.0,
        at_k if at_k is not None and even else -2.0,
        b[0].item(),
    ]


@pytest.mark.parametrize("even", [True, False])
@pytest.mark.parametrize("at", [2, 25, 32], ids=["k_below_m", "k_in_bounds", "k_out_of_bounds"])
@pytest.mark.parametrize("w", WORLDS)
def test_one_peer_stores(k, w, at, even):
    n, m, block, v = 32, 5, 8, 40
    bufs = ints(w, n, seed=30 + w)
    before = [b.clone() for b in bufs]
    peer = w - 1
    k.one_peer_stores[(1,)](bufs[0], address_table(bufs), peer, n, m, at, v, even, block)
    ref = before[peer].clone()
    i = torch.arange(block, dtype=torch.int32)
    ref[:block] = 10 * i + 1
    ref[block : block + m] = i[:m]
    if even:
        ref[2 * block : 3 * block] = i + 50

    def put(where, value):  # stores out of bounds write nothing
        if where < n:
            ref[where] = value

    put(at, v + 2)  # one[k] = v, then one[k] += 2
    if at < m:
        put(at + 1, v)
    if even:
        put(at + 2, v + 1)
    for j, (b, old) in enumerate(zip(bufs, before)):
        assert torch.equal(b, ref if j == peer else old), f"buffer {j}"


@pytest.mark.parametrize("op,even", [(op, True) for op in [*ATOMIC_REFS, "cas"]] + [("add", False)])
@pytest.mark.parametrize("w", WORLDS)
def test_one_peer_atomics(k, w, op, even):
    n, block, at = 12, 16, 10
    bufs = ints(w, n, seed=40 + w)
    before = [b.clone() for b in bufs]
    peer = w - 1
    out = torch.full((block + 1,), -7, dtype=torch.int32)
    k.one_peer_atomics[(1,)](out, address_table(bufs), peer, n, at, op, even, block)
    ref = before[peer].clone()
    i = torch.arange(n, dtype=torch.int32)
    expected = torch.zeros(block + 1, dtype=torch.int32)
    if op == "cas":
        expected[:n] = ref
        ref = torch.where(ref == i, i + 3, ref)
    elif even:
        expected[:n] = ref
        ref = ATOMIC_REFS[op](ref, i + 3)
    expected[block] = ref[at]
    if op == "cas":
        ref[at] = 7 if ref[at] == at else ref[at]
    else:
        ref[at] = ATOMIC_REFS[op](ref[at : at + 1], torch.tensor([7], dtype=torch.int32))[0]
    ref[at + 1] += 1
    assert torch.equal(out, expected)
    for j, (b, old) in enumerate(zip(bufs, before)):
        assert torch.equal(b, ref if j == peer else old), f"buffer {j}"


@pytest.mark.parametrize("even", [True, False])
@pytest.mark.parametrize("w", WORLDS)
def test_one_peer_signal_and_wait(k, w, even):
    peer, at, block = w - 1, 1, 2

    def body():
        pads = [torch.tensor([0, 0, 0, 4, 0, 0], dtype=torch.int32) for _ in range(w)]
        k.one_peer_flags[(1,)](pads[0], address_table(pads), peer, at, even, block)
        return pads

    flag = 1 if even else 0
    pads = [p.tolist() for p in in_one_rank(body)]
    assert pads[peer] == [0, 5, 0, 6, flag, flag]
    assert all(p == [0, 0, 0, 4, 0, 0] for j, p in enumerate(pads) if j != peer)


@pytest.mark.parametrize("valid", [True, False])
@pytest.mark.parametrize("w", WORLDS)
def test_one_peer_with_a_ptr_mask(k, w, valid):
    n, block = 13, 4
    bufs = ints(w, n, seed=50 + w, high=3)
    for b in bufs:
        b[2 * block : 3 * block] = 0  # flags that signal(wait_for=0) finds lowered
    before = [b.clone() for b in bufs]
    peer = w - 1
    live = peer + 1 if valid else peer

    def body():
        out = torch.full((2 * block + 1,), -7, dtype=torch.int32)
        k.one_peer_ptr_mask[(1,)](out, address_table(bufs), peer, n, live, block)
        return out, bufs

    out, after = in_one_rank(body)
    ref = before[peer].clone()
    expected = torch.zeros(2 * block + 1, dtype=torch.int32)  # masked-off loads and old values are 0
    if valid:
        i = torch.arange(block, dtype=torch.int32)
        expected[:block] = expected[block : 2 * block] = ref[:block]
        ref[:block] += 1
        expected[2 * block] = ref[1]
        ref[1] = 9 if ref[1] == 1 else ref[1]
        ref[block : 2 * block] = i + 20
        ref[2 * block : 3 * block] = 5
        ref[n - 1] = 3
    assert torch.equal(out, expected)
    for j, (b, old) in enumerate(zip(after, before)):
        assert torch.equal(b, ref if j == peer else old), f"buffer {j}"


# -- the same masks on remote="nvshmem" bindings (every peer remote; castpile refuses atomics there) ----------

REMOTE_KERNELS = {"table_masked_loads", "table_masked_flags"}


def remote_kernels() -> str:
    """The kernels castpile lowers on ``remote="nvshmem"`` bindings, with that on their bindings."""
    return remote_source(KERNELS, drop=set(COMPILES) - REMOTE_KERNELS)


@pytest.fixture(scope="module")
def remote(tmp_path_factory):
    return transpiled(tmp_path_factory.mktemp("remote"), remote_kernels(), "kernels_scalar_remote")


@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("w", WORLDS)
def test_remote_loads_and_stores_with_scalar_masks(remote, w, mask):
    def launch(out, bufs, args):
        s = symmetric(w, 1, len(bufs[0]), torch.float32, bufs)

        def body():
            remote.table_masked_loads[(1,)](out, s[0].remote_ptrs, *args)
            return out

        return in_one_rank(body), [b.tensor for b in s]

    check_masked_loads_and_stores(w, mask, launch)


@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("w", WORLDS)
def test_remote_signal_and_wait_with_scalar_masks(remote, w, mask):
    def launch(start, args):
        s = symmetric(w, 1, len(start), torch.int32, [start] * w)
        in_one_rank(lambda: remote.table_masked_flags[(1,)](s[0].tensor, s[0].remote_ptrs, *args))
        return [b.tensor for b in s]

    check_masked_flags(w, mask, launch)


# -- every kernel above compiles for sm_90 --------------------------------------------------------

EVERY_MASK = [{"EVEN": even, "SCALAR": scalar} for even, scalar, _, _ in MASKS.values()]
# kernel: (the buffers' element type, [constexprs of each compile]); the signature is read from the kernel.
COMPILES = {
    "wait_scalar_flags": ("i32", [{"N": 4}]),
    "wait_constexpr_mask": ("i32", [{"EVEN": even, "BLOCK": 4} for even in (True, False)]),
    "table_masked_loads": ("fp32", [{"W": 3, **mask, "BLOCK": 16} for mask in EVERY_MASK]),
    "table_masked_atomics": (
        "i32",
        [{"OP": op, "W": 3, "EVEN": True, "SCALAR": False, "BLOCK": 16} for op in ATOMIC_REFS]
        + [{"OP": "add", "W": 3, **mask, "BLOCK": 16} for mask in EVERY_MASK[1:]],
    ),
    "table_masked_flags": ("i32", [{"W": 3, **mask, "BLOCK": 2} for mask in EVERY_MASK]),
    "one_peer_loads": ("fp32", [{"EVEN": even, "BLOCK": 16} for even in (True, False)]),
    "one_peer_stores": ("i32", [{"EVEN": even, "BLOCK": 8} for even in (True, False)]),
    "one_peer_atomics": (
        "i32",
        [{"OP": op, "EVEN": True, "BLOCK": 16} for op in [*ATOMIC_REFS, "cas"]]
        + [{"OP": "add", "EVEN": False, "BLOCK": 16}],
    ),
    "one_peer_ptr_mask": ("i32", [{"BLOCK": 4}]),
    "one_peer_flags": ("i32", [{"EVEN": even, "BLOCK": 2} for even in (True, False)]),
}


def jobs_for(module: Path, kernels, nvshmem=False) -> list[Job]:
    """The compiles of ``kernels`` in ``module`` (a transpilation of the kernels file)."""
    source = KERNELS.read_text()
    jobs = []
    for kernel in sorted(kernels):
        dtype, variants = COMPILES[kernel]
        types = {"table": "*i64", "flags": "*i32", "out": f"*{dtype}", "example": f"*{dtype}"}
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
    module = tmp_path / f"kernels_scalar_forms_{strategy}.py"
    module.write_bytes(castpile.transpile(KERNELS.read_bytes(), str(KERNELS), strategy=strategy))
    jobs = jobs_for(module, COMPILES)
    if strategy == "loop":  # remote bindings lower the same under both strategies
        remote = tmp_path / "kernels_scalar_forms_remote.py"
        remote.write_bytes(castpile.transpile(remote_kernels().encode(), str(remote)))
        jobs += jobs_for(remote, REMOTE_KERNELS, nvshmem=True)
    results = compile_for_sm90(jobs, tmp_path)
    failures = {name: r.error for name, r in results.items() if not r.ok}
    assert not failures, "\n\n".join(f"{name}:\n{error}" for name, error in failures.items())
