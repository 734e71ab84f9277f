"""Lowering language v1.2's peer forms: one peer ``table[r]`` (P = ()), ``ptr_mask=`` on table slices, a dtype
as the example.

The cases' form (the kernel a body's lines sit in, one expected text or one per strategy): tests/testkit/lowering.py.
"""

from textwrap import dedent

import pytest

import castpile
from testkit.lowering import (
    check_cases_compile_for_sm90,
    check_kernel_lines,
    check_left_alone,
    check_remote_kernel_lines,
)

KERNEL_CASES = [
    pytest.param(
        dedent("""\
            one = multicast_like(out, table[(i + 1) % W], shape=(n,))
            x = one[offs]
        """),
        {
            "loop": dedent("""\
                one = _castpile_table_entry(table, (i + 1) % W)
                x = _castpile_load_loop(one, 1, None, out, offs, (offs < n))
            """),
            "gather": dedent("""\
                one = _castpile_table_entry(table, (i + 1) % W)
                x = _castpile_load_gather(one, 1, None, out, offs, (offs < n))
            """),
        },
        id="one peer at a run-time rank: its address loaded once, at the binding; P = ()",
    ),
    pytest.param(
        dedent("""\
            one = multicast_like(out, table[C], shape=(n,))
            one[offs] = v
            tl.atomic_add(one[0], 1)
        """),
        {
            "loop": dedent("""\
                one = _castpile_table_entry(table, C)
                _castpile_store_loop(one, 1, None, out, offs, (offs < n), v, site='k.py:12')
                _castpile_atomic_loop(one, 1, None, out, 0, (0 < n), "add", 1, keep_old=False)
            """),
            "gather": dedent("""\
                one = _castpile_table_entry(table, C)
                _castpile_store_gather(one, 1, None, out, offs, (offs < n), v, site='k.py:12')
                _castpile_atomic_gather(one, 1, None, out, 0, (0 < n), "add", 1, keep_old=False)
            """),
        },
        id="one peer at a constexpr rank: a store and an atomic, no stack dim",
    ),
    pytest.param(
        dedent("""\
            peer_ptr = table[i]
            one = multicast_like(out, peer_ptr)
            i = i + 1
            x = one[offs]
        """),
        {
            "loop": dedent("""\
                peer_ptr = _castpile_table_entry(table, i)
                one = peer_ptr
                i = i + 1
                x = _castpile_load_loop(one, 1, None, out, offs, None)
            """),
            "gather": dedent("""\
                peer_ptr = _castpile_table_entry(table, i)
                one = peer_ptr
                i = i + 1
                x = _castpile_load_gather(one, 1, None, out, offs, None)
            """),
        },
        id="a name bound to table[r] first: the address loaded where the name is bound",
    ),
    pytest.param(
        dedent("""\
            one = multicast_like(out, table[i], shape=(n,))
            s = tl.sum(one[offs], axis=0)
            t = tl.max(tl.load(one[offs], mask=offs < m, other=-1), axis=0)
        """),
        {
            "loop": dedent("""\
                one = _castpile_table_entry(table, i)
                s = tl.sum(_castpile_load_loop(one, 1, None, out, offs, (offs < n)), axis=0)
                t = tl.max(_castpile_load_loop(one, 1, None, out, offs, (offs < n), offs < m, -1), axis=0)
            """),
            "gather": dedent("""\
                one = _castpile_table_entry(table, i)
                s = tl.sum(_castpile_load_gather(one, 1, None, out, offs, (offs < n)), axis=0)
                t = tl.max(_castpile_load_gather(one, 1, None, out, offs, (offs < n), offs < m, -1), axis=0)
            """),
        },
        id="left alone: a reduction of one peer is Triton's own, over the elements",
    ),
    pytest.param(
        dedent("""\
            one = multicast_like(out, table[i])
            castpile.signal(one[j], value=2)
            castpile.wait(one[j + 1])
        """),
        dedent("""\
            one = _castpile_table_entry(table, i)
            _castpile_signal(one, 1, None, out, j, None, 2)
            _castpile_wait(one, 1, None, out, j + 1, None)
        """),
        id="signal and wait on one peer",
    ),
    pytest.param(
        dedent("""\
            one = multicast_like(out, table[i])
            table = table + 1
            i = i + 1
            one[offs] = v
        """),
        {
            "loop": dedent("""\
                one = _castpile_table_entry(table, i)
                table = table + 1
                i = i + 1
                _castpile_store_loop(one, 1, None, out, offs, None, v, site='k.py:14')
            """),
            "gather": dedent("""\
                one = _castpile_table_entry(table, i)
                table = table + 1
                i = i + 1
                _castpile_store_gather(one, 1, None, out, offs, None, v, site='k.py:14')
            """),
        },
        id="the table and the rank rebound after the binding change nothing: the address is loaded already",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,), ptr_mask=tl.arange(0, 4) != i)
            x = bufs[offs]
            s = tl.sum(bufs[offs], axis=0)
        """),
        {
            "loop": dedent("""\
                bufs = table; bufs_mask = _castpile_slice_mask(tl.arange(0, 4) != i, W)
                x = _castpile_load_loop(bufs, W, bufs_mask, out, offs, (offs < n))
                s = _castpile_reduce_loop(bufs, W, bufs_mask, out, offs, (offs < n), "sum")
            """),
            "gather": dedent("""\
                bufs = table; bufs_mask = _castpile_slice_mask(tl.arange(0, 4) != i, W)
                x = _castpile_load_gather(bufs, W, bufs_mask, out, offs, (offs < n))
                s = _castpile_reduce_loop(bufs, W, bufs_mask, out, offs, (offs < n), "sum")
            """),
        },
        id="ptr_mask= on a table slice: evaluated and checked at the binding, passed as the stack mask",
    ),
    pytest.param(
        dedent("""\
            part = table[1:W]
            live = tl.arange(0, 2) < i
            bufs = multicast_like(out, part, ptr_mask=live)
            bufs[offs] = v
        """),
        {
            "loop": dedent("""\
                part = table + 1
                live = tl.arange(0, 2) < i
                bufs = part; bufs_mask = _castpile_slice_mask(live, W - 1)
                _castpile_store_loop(bufs, W - 1, bufs_mask, out, offs, None, v, site='k.py:14')
            """),
            "gather": dedent("""\
                part = table + 1
                live = tl.arange(0, 2) < i
                bufs = part; bufs_mask = _castpile_slice_mask(live, W - 1)
                _castpile_store_gather(bufs, W - 1, bufs_mask, out, offs, None, v, site='k.py:14')
            """),
        },
        id="ptr_mask= held in a name, on a named slice",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(tl.float32, table[:W], shape=(n,))
            x = tl.atomic_cas(bufs[offs], 0, 1)
        """),
        {
            "loop": dedent("""\
                bufs_example = _castpile_typed(table, tl.float32); bufs = table
                x = _castpile_atomic_cas_loop(bufs, W, None, bufs_example, offs, (offs < n), 0, 1)
            """),
            "gather": dedent("""\
                bufs_example = _castpile_typed(table, tl.float32); bufs = table
                x = _castpile_atomic_cas_gather(bufs, W, None, bufs_example, offs, (offs < n), 0, 1)
            """),
        },
        id="a dtype as example: a typed pointer at the table stands in for it",
    ),
    pytest.param(
        dedent("""\
            one = multicast_like(triton.language.int16, table[i])
            x = one[offs]
        """),
        {
            "loop": dedent("""\
                one_example = _castpile_typed(table, triton.language.int16); one = _castpile_table_entry(table, i)
                x = _castpile_load_loop(one, 1, None, one_example, offs, None)
            """),
            "gather": dedent("""\
                one_example = _castpile_typed(table, triton.language.int16); one = _castpile_table_entry(table, i)
                x = _castpile_load_gather(one, 1, None, one_example, offs, None)
            """),
        },
        id="a dtype through triton.language, on one peer: the pointer at the table",
    ),
    pytest.param(
        dedent("""\
            one = multicast_like(tl.bfloat16, tl.load(table + i))
            x = one[offs]
        """),
        {
            "loop": dedent("""\
                one_example = _castpile_typed(None, tl.bfloat16); one = tl.load(table + i)
                x = _castpile_load_loop(one, one.numel, None, one_example, offs, None)
            """),
            "gather": dedent("""\
                one_example = _castpile_typed(None, tl.bfloat16); one = tl.load(table + i)
                x = _castpile_load_gather(one, one.numel, None, one_example, offs, None)
            """),
        },
        id="a dtype with a tensor tile: a typed pointer at address 0 (only its type is read)",
    ),
]

REMOTE_CASES = [
    pytest.param(
        dedent("""\
            one = multicast_like(out, table[i], shape=(n,), remote="nvshmem")
            x = one[offs]
        """),
        dedent("""\
            one = _castpile_table_entry(table, i)
            x = _castpile_load_remote(one, 1, None, out, offs, (offs < n), table)
        """),
        id="remote= on one peer: the table passed for its scratch header",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], ptr_mask=tl.arange(0, 4) != i, remote="nvshmem")
            bufs[offs] = v
        """),
        dedent("""\
            bufs = table; bufs_mask = _castpile_slice_mask(tl.arange(0, 4) != i, W)
            _castpile_store_remote(bufs, W, bufs_mask, out, offs, None, table, v, site='k.py:12')
        """),
        id="remote= on a slice with ptr_mask=",
    ),
]


# Files castpile must return byte for byte: nothing in them is castpile's.
LEFT_ALONE = [
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            import castpile


            @triton.jit
            def k(out, table, rank, W: tl.constexpr):
                peer = tl.load(table + (rank + 1) % W).to(tl.pointer_type(tl.bfloat16))
                ranks = tl.arange(0, W)
                tl.store(peer + ranks, tl.zeros((W,), tl.bfloat16), mask=ranks != rank)
        """),
        id="a peer pointer by hand, a dtype and a mask over the ranks, without bindings",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            import castpile


            @triton.jit
            def k(out, tiles, BLOCK: tl.constexpr):
                offs = tl.arange(0, BLOCK)
                row = offs[None, :]
                tl.store(out + row, row)
        """),
        id="a subscript that adds a dim is no table entry",
    ),
]


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize(("source", "expected"), KERNEL_CASES)
def test_kernel_lines(source, expected, strategy):
    check_kernel_lines(source, expected, strategy)


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize(("source", "expected"), REMOTE_CASES)
def test_remote_kernel_lines(source, expected, strategy):
    check_remote_kernel_lines(source, expected, strategy)


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize("source", LEFT_ALONE)
def test_left_alone_byte_for_byte(source, strategy):
    check_left_alone(source, strategy)


def test_the_cases_compile_for_sm90(tmp_path):
    check_cases_compile_for_sm90(tmp_path, kernel_cases=KERNEL_CASES, remote_cases=REMOTE_CASES)
