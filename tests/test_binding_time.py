"""Binding time and strides (contract v1.2): a binding's arguments are evaluated where it stands,
and any stride values are legal.  Kernels of tests/kernels_binding_time.py run in the interpreter
(W host tensors stand in for W GPUs) against torch references, and compile for sm_90."""

import re
from pathlib import Path

import pytest
import torch

import castpile
from compile_sm90 import Job, compile_for_sm90
from testkit import address_table, padded, transpiled_module
from testkit.diagnostics import diagnostics_of

KERNELS = Path(__file__).with_name("kernels_binding_time.py")
SENTINEL = 777.0
WORLDS = [2, 3]


@pytest.fixture(scope="module", params=castpile.STRATEGIES)
def k(request, tmp_path_factory):
    return transpiled_module(KERNELS, request.param, tmp_path_factory.mktemp(request.param))


def fenced(w, n, spare=16):
    """W buffers of n elements, buffer j holding 1000 * j + arange(n), each followed by ``spare``
    sentinels in the same storage: a read past element n - 1 reads SENTINEL."""
    storage = torch.full((w, n + spare), SENTINEL)
    for j in range(w):
        storage[j, :n] = torch.arange(n) + 1000.0 * j
    return storage, [storage[j] for j in range(w)]


def masked_rows(bufs, n, b, at=None):
    """The (P, b) result of loading bufs[a] (or bufs[at(a)]) for a < n: 0 elsewhere and on padded rows."""
    a = torch.arange(b)
    picked = a if at is None else at(a)
    expected = torch.zeros(padded(len(bufs)), b)
    for j, buf in enumerate(bufs):
        expected[j] = torch.where(a < n, buf[picked.clamp(max=buf.numel() - 1)], 0.0)
    return expected


def run(kernel, bufs, dims, *args, before=()):
    """``kernel[(1,)](res, *before, table, *args)`` with ``res`` of shape ``dims``, -1 before the launch: res."""
    res = torch.full(dims, -1.0)
    kernel[(1,)](res, *before, address_table(bufs), *args)
    return res


# 1. Names the binding used, rebound afterwards, change nothing about it.
@pytest.mark.parametrize("w", WORLDS)
def test_shape_name_rebound_after_the_binding(k, w):
    n, b = 5, 16
    storage, bufs = fenced(w, n)
    before = storage.clone()
    assert torch.equal(run(k.shape_rebound, bufs, (padded(w), b), n, w, b), masked_rows(list(before), n, b))
    expected = before.clone()
    expected[:, :n] += 1
    assert torch.equal(storage, expected)


@pytest.mark.parametrize("w", WORLDS)
def test_shape_name_rebound_in_the_loop_around_the_binding(k, w):
    n, b = 5, 16
    _storage, bufs = fenced(w, n + 2)
    got = run(k.shape_rebound_in_loop, bufs, (padded(w), b), n, w, b)
    assert torch.equal(got, masked_rows(bufs, n, b) + masked_rows(bufs, n + 2, b))


@pytest.mark.parametrize("w", WORLDS)
def test_strides_name_rebound_after_the_binding(k, w):
    n, b, s = 5, 8, 2
    _storage, bufs = fenced(w, n * s)
    got = run(k.strides_rebound, bufs, (padded(w), b), n, s, w, b)
    assert torch.equal(got, masked_rows(bufs, n, b, at=lambda a: a * s))


@pytest.mark.parametrize("w", WORLDS)
def test_count_copied_in_a_static_range_loop(k, w):
    n, b = 5, 8
    storage, bufs = fenced(w, n)
    got = run(k.count_in_static_loop, bufs, (w + 1, b), n, w, b)
    a = torch.arange(b)
    for r in range(w):
        assert torch.equal(got[r], torch.where(a < n, storage[r:, :b].sum(0), 0.0)), r
    assert torch.equal(got[w], torch.zeros(b))


READ_AS_BOUND = {  # kernel -> whether it takes a pointer x (the example) after res
    "count_rebound": False,  # a constexpr slice bound rebound after the binding
    "example_bound_to_its_own_name": True,  # x = multicast_like(x, ...)
    "example_rebound": True,  # the example's name rebound to a pointer of another type
    "tile_bound_to_its_own_name": False,  # a tensor tile bound to its own name, its ptr_mask read from it
    "align_none": False,  # 14. align=None means no alignment
}


@pytest.mark.parametrize("w", WORLDS)
@pytest.mark.parametrize("kernel", READ_AS_BOUND)
def test_buffers_read_as_bound(k, w, kernel):
    n, b = 5, 8
    _storage, bufs = fenced(w, n)
    example = (torch.zeros(1),) if READ_AS_BOUND[kernel] else ()
    got = run(getattr(k, kernel), bufs, (padded(w), b), n, w, b, before=example)
    assert torch.equal(got, masked_rows(bufs, n, b))


@pytest.mark.parametrize("w", WORLDS)
def test_out_bound_to_its_own_name_reads_it_before_the_binding(k, w):
    n, b = 5, 8
    storage, bufs = fenced(w, n)
    src = torch.arange(b, dtype=torch.float32) * 10
    k.out_bound_to_its_own_name[(1,)](bufs[0], src, address_table(bufs), n, w, b)
    expected = torch.full_like(storage, SENTINEL)
    expected[:, :n] = src[:n] + 0.0  # buffer 0's first element was 0
    assert torch.equal(storage, expected)


@pytest.mark.parametrize("w", WORLDS)
def test_table_and_named_slice_rebound_after_the_bindings(k, w):
    n, b = 5, 8
    _storage, bufs = fenced(w, n)
    got = run(k.table_and_alias_rebound, bufs, (2, padded(w), b), n, w, b)
    assert torch.equal(got, masked_rows(bufs, n, b).expand(2, -1, -1))


# 2. Strides of 0 and index terms that cancel keep the shape of the indices.
@pytest.mark.parametrize("w", WORLDS)
def test_zero_stride_reaches_element_zero_from_every_index(k, w):
    n, b = 5, 8
    _storage, bufs = fenced(w, n)
    got = run(k.zero_stride, bufs, (2, padded(w), b), n, w, b)
    zero = lambda a: a * 0  # noqa: E731
    assert torch.equal(got[0], masked_rows(bufs, n, b, at=zero))
    assert torch.equal(got[1], masked_rows(bufs, b, b, at=zero))  # no shape=: every index in bounds


@pytest.mark.parametrize("w", WORLDS)
def test_zero_stride_stack_sum_and_atomic(k, w):
    n, b = 5, 8
    storage, bufs = fenced(w, n)
    before = storage.clone()
    got = run(k.zero_stride_sum_and_atomic, bufs, (b,), n, w, b)
    assert torch.equal(got, torch.where(torch.arange(b) < n, before[:, 0].sum(), 0.0))
    expected = before.clone()
    expected[:, 0] += n
    assert torch.equal(storage, expected)


@pytest.mark.parametrize("w", WORLDS)
def test_cancelling_index_terms_reach_one_element(k, w):
    b = 8
    _storage, bufs = fenced(w, 16)
    got = run(k.cancelling_strides, bufs, (padded(w), b), w, b)
    assert torch.equal(got, masked_rows(bufs, 4, b, at=lambda j: j * 0 + 3))


@pytest.mark.parametrize("w", WORLDS)
def test_zero_row_stride_on_a_2d_index(k, w):
    m, n, bi, bj = 3, 5, 4, 8
    _storage, bufs = fenced(w, n)
    got = run(k.zero_row_stride_2d, bufs, (padded(w), bi, bj), m, n, w, bi, bj)
    i, j = torch.arange(bi)[:, None], torch.arange(bj)[None, :]
    expected = torch.zeros(padded(w), bi, bj)
    for p, buf in enumerate(bufs):
        expected[p] = torch.where((i < m) & (j < n), buf[j.clamp(max=n - 1)].expand(bi, bj), 0.0)
    assert torch.equal(got, expected)


@pytest.mark.parametrize("w", WORLDS)
def test_broadcast_view_read_whole(k, w):
    _storage, bufs = fenced(w, 8)
    expected = torch.zeros(padded(w), 4, 8)
    for p, buf in enumerate(bufs):
        expected[p] = buf[:8].expand(4, 8)
    assert torch.equal(run(k.broadcast_view, bufs, (padded(w), 4, 8), w), expected)


def test_what_a_loop_makes_of_rebinding_is_a_located_error_that_says_how_to_write_it():
    """In a loop, a binding's own name before it would be the multicast tensor from the second pass on;
    a named slice rebound in the loop around its binding may reach it."""
    source = """\
        import triton
        import triton.language as tl
        from castpile import multicast_like


        @triton.jit
        def k(out, table, n, W: tl.constexpr):
            for _ in range(2):
                out = multicast_like(out, table[:W], shape=(n,))
                x = out[0]
            for _ in range(2):
                y = bufs[0] + 1
                bufs = multicast_like(table, table[:W])
            tile = table[:W]
            for _ in range(2):
                again = multicast_like(table, tile)
                tile = table[1:W]
        """
    assert diagnostics_of(source, dedent=True) == [
        (9, 30, "E208", {"name": "out"}),
        (12, 13, "E209", {"name": "bufs"}),
        (16, 39, "E107", {"name": "tile", "what": "slice", "spelled": "table[lo:hi]"}),
    ]


def _signature(*middle: tuple[str, str], head=(("res", "*fp32"),), tail=("W", "B")) -> dict[str, str]:
    """A kernel's signature: ``head``, the table, ``middle`` and the constexpr ``tail``."""
    return {**dict(head), "table": "*i64", **dict(middle), **dict.fromkeys(tail, "constexpr")}


N = ("n", "i32")
WB = {"W": 3, "B": 16}
JOBS = [
    ("shape_rebound", _signature(N), WB),
    ("shape_rebound_in_loop", _signature(N), WB),
    ("strides_rebound", _signature(N, ("s", "i32")), WB),
    ("count_rebound", _signature(N), WB),
    ("count_in_static_loop", _signature(N), WB),
    ("example_bound_to_its_own_name", _signature(N, head=(("res", "*fp32"), ("x", "*fp32"))), WB),
    ("example_rebound", _signature(N, head=(("res", "*fp32"), ("x", "*fp32"))), WB),
    ("out_bound_to_its_own_name", _signature(N, head=(("out", "*fp32"), ("src", "*fp32"))), WB),
    ("tile_bound_to_its_own_name", _signature(N), WB),
    ("table_and_alias_rebound", _signature(N), WB),
    ("zero_stride", _signature(N), WB),
    ("zero_stride_sum_and_atomic", _signature(N), WB),
    ("cancelling_strides", _signature(), WB),
    ("zero_row_stride_2d", _signature(("m", "i32"), N, tail=("W", "BI", "BJ")), {"W": 3, "BI": 4, "BJ": 8}),
    ("broadcast_view", _signature(tail=("W",)), {"W": 3}),
    ("align_none", _signature(N), WB),
]


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
def test_binding_time_kernels_compile_for_sm90(tmp_path, strategy):
    module = tmp_path / f"kernels_binding_time_{strategy}.py"
    module.write_bytes(castpile.transpile(KERNELS.read_bytes(), str(KERNELS), strategy=strategy))
    assert {kernel for kernel, _, _ in JOBS} == set(re.findall(r"^def (\w+)\(", KERNELS.read_text(), re.M))
    jobs = [Job(module, kernel, signature, constexprs) for kernel, signature, constexprs in JOBS]
    results = compile_for_sm90(jobs, tmp_path)
    assert len(results) == len(jobs) and all(r.ok for r in results.values()), {
        name: r.error for name, r in results.items() if not r.ok
    }
