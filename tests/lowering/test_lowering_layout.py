"""Lowering keeps the layout: line numbers kept, untouched bytes kept, CRLF and tabs kept.

The cases' form (the kernel a body's lines sit in, one expected text or one per strategy): tests/testkit/lowering.py.
"""

from textwrap import dedent

import pytest

import castpile
from testkit.lowering import check_cases_compile_for_sm90, check_kernel_lines, check_left_alone, check_whole_file

KERNEL_CASES = [
    # layout: line numbers kept, untouched bytes kept
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            x = bufs[
                offs]
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_load_loop(bufs, W, None, out, offs, (offs < n)
                )
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_load_gather(bufs, W, None, out, offs, (offs < n)
                )
            """),
        },
        id="an access spanning two lines keeps both",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            x = (bufs[offs]
                 + 1)
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = (_castpile_load_loop(bufs, W, None, out, offs, (offs < n))
                     + 1)
            """),
            "gather": dedent("""\
                bufs = table
                x = (_castpile_load_gather(bufs, W, None, out, offs, (offs < n))
                     + 1)
            """),
        },
        id="a parenthesised expression spanning two lines",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            bufs[offs] = (v +
                          1)
        """),
        {
            "loop": dedent("""\
                bufs = table
                _castpile_store_loop(bufs, W, None, out, offs, (offs < n), (v + 1), site='k.py:12'
                )
            """),
            "gather": dedent("""\
                bufs = table
                _castpile_store_gather(bufs, W, None, out, offs, (offs < n), (v + 1), site='k.py:12'
                )
            """),
        },
        id="a store whose value spans two lines",
    ),
    pytest.param(
        dedent("""\
            # bind
            bufs = multicast_like(out, table[:W])  # the stack
            y = tl.load(out + offs)
            x = bufs[offs]  # read
        """),
        {
            "loop": dedent("""\
                # bind
                bufs = table  # the stack
                y = tl.load(out + offs)
                x = _castpile_load_loop(bufs, W, None, out, offs, None)  # read
            """),
            "gather": dedent("""\
                # bind
                bufs = table  # the stack
                y = tl.load(out + offs)
                x = _castpile_load_gather(bufs, W, None, out, offs, None)  # read
            """),
        },
        id="comments and other statements are kept",
    ),
    pytest.param(
        dedent("""\
            bufs_shape0 = 1
            bufs = multicast_like(out, table[:W], shape=(n - 1,))
            x = bufs[0]
        """),
        {
            "loop": dedent("""\
                bufs_shape0 = 1
                bufs = table; bufs_shape0_ = n - 1
                x = _castpile_load_loop(bufs, W, None, out, 0, (0 < bufs_shape0_))
            """),
            "gather": dedent("""\
                bufs_shape0 = 1
                bufs = table; bufs_shape0_ = n - 1
                x = _castpile_load_gather(bufs, W, None, out, 0, (0 < bufs_shape0_))
            """),
        },
        id="a hoisted name that is taken gets a _ suffix",
    ),
    pytest.param(
        dedent("""\
            _castpile_mine = 1
            bufs = multicast_like(out, table[:W], shape=(n - 1,))
            bufs[tl.atomic_add(ctr, 1)] = 1.0
        """),
        {
            "loop": dedent("""\
                _castpile_mine = 1
                bufs = table; bufs_shape0 = n - 1
                _castpile2_i0 = tl.atomic_add(ctr, 1); _castpile2_store_loop(bufs, W, None, out, _castpile2_i0, (_castpile2_i0 >= 0) & (_castpile2_i0 < bufs_shape0), 1.0, site='k.py:13')
            """),
            "gather": dedent("""\
                _castpile_mine = 1
                bufs = table; bufs_shape0 = n - 1
                _castpile2_i0 = tl.atomic_add(ctr, 1); _castpile2_store_gather(bufs, W, None, out, _castpile2_i0, (_castpile2_i0 >= 0) & (_castpile2_i0 < bufs_shape0), 1.0, site='k.py:13')
            """),
        },
        id="a _castpile_ name in the file: helpers and temporaries use _castpile2_",
    ),
]


FILE_CASES = [
    # A whole file: CRLF line endings and tab indentation are kept.
    pytest.param(
        (
            "import triton\r\n"
            "import triton.language as tl\r\n"
            "from castpile import multicast_like\r\n"
            "\r\n"
            "\r\n"
            "@triton.jit\r\n"
            "def k(out, table, n, W: tl.constexpr):\r\n"
            "\tbufs = multicast_like(out, table[:W])  # bind\r\n"
            "\tx = bufs[0]\t# read\r\n"
            "\ty = tl.load(out)\r\n"
        ),
        {
            "loop": (
                "import triton\r\n"
                "import triton.language as tl\r\n"
                "from castpile import multicast_like\r\n"
                "\r\n"
                "\r\n"
                "@triton.jit\r\n"
                "def k(out, table, n, W: tl.constexpr):\r\n"
                "\tbufs = table  # bind\r\n"
                "\tx = _castpile_load_loop(bufs, W, None, out, 0, None)\t# read\r\n"
                "\ty = tl.load(out)\r\n"
            ),
            "gather": (
                "import triton\r\n"
                "import triton.language as tl\r\n"
                "from castpile import multicast_like\r\n"
                "\r\n"
                "\r\n"
                "@triton.jit\r\n"
                "def k(out, table, n, W: tl.constexpr):\r\n"
                "\tbufs = table  # bind\r\n"
                "\tx = _castpile_load_gather(bufs, W, None, out, 0, None)\t# read\r\n"
                "\ty = tl.load(out)\r\n"
            ),
        },
        id="CRLF line endings and tabs",
    ),
]


# Files castpile must return byte for byte: nothing in them is castpile's.
LEFT_ALONE = [
    pytest.param(
        ("import triton\r\nimport castpile\r\n\r\n\r\ndef f():\r\n\treturn 1  # tab-indented\r\n"),
        id="CRLF and tabs in a module that imports castpile but binds nothing",
    ),
]


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize(("source", "expected"), KERNEL_CASES)
def test_kernel_lines(source, expected, strategy):
    check_kernel_lines(source, expected, strategy)


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize(("source", "expected"), FILE_CASES)
def test_whole_files(source, expected, strategy):
    check_whole_file(source, expected, strategy)


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize("source", LEFT_ALONE)
def test_left_alone_byte_for_byte(source, strategy):
    check_left_alone(source, strategy)


def test_the_cases_compile_for_sm90(tmp_path):
    check_cases_compile_for_sm90(tmp_path, kernel_cases=KERNEL_CASES, file_cases=FILE_CASES)
