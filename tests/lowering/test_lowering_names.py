"""Lowering finds castpile's and triton.language's names as Python resolves them: import forms, aliases, scopes; lookalikes are left alone.

The cases' form (the kernel a body's lines sit in, one expected text or one per strategy): tests/testkit/lowering.py.
"""

from textwrap import dedent

import pytest

import castpile
from testkit.lowering import check_cases_compile_for_sm90, check_left_alone, check_whole_file


FILE_CASES = [
    # Import forms and scopes: where castpile's names come from.
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            import castpile as cp


            @triton.jit
            def k(out, table, W: tl.constexpr):
                bufs = cp.multicast_like(out, table[:W])
                cp.signal(bufs[0])
                cp.wait(bufs[0])
        """),
        dedent("""\
            import triton
            import triton.language as tl
            import castpile as cp


            @triton.jit
            def k(out, table, W: tl.constexpr):
                bufs = table
                _castpile_signal(bufs, W, None, out, 0, None)
                _castpile_wait(bufs, W, None, out, 0, None)
        """),
        id="import castpile as cp",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            from castpile import multicast_like as mcl, wait as cwait


            @triton.jit(do_not_specialize=['n'])
            def k(out, table, n, W: tl.constexpr):
                bufs = mcl(out, table[:W])
                cwait(bufs[n])
        """),
        dedent("""\
            import triton
            import triton.language as tl
            from castpile import multicast_like as mcl, wait as cwait


            @triton.jit(do_not_specialize=['n'])
            def k(out, table, n, W: tl.constexpr):
                bufs = table
                _castpile_wait(bufs, W, None, out, n, None)
        """),
        id="from castpile import ... as ...",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl


            def make():
                from castpile import multicast_like

                @triton.jit
                def k(out, table, W: tl.constexpr):
                    bufs = multicast_like(out, table[:W])
                    x = bufs[0]

                return k
        """),
        {
            "loop": dedent("""\
                import triton
                import triton.language as tl


                def make():
                    from castpile import multicast_like

                    @triton.jit
                    def k(out, table, W: tl.constexpr):
                        bufs = table
                        x = _castpile_load_loop(bufs, W, None, out, 0, None)

                    return k
            """),
            "gather": dedent("""\
                import triton
                import triton.language as tl


                def make():
                    from castpile import multicast_like

                    @triton.jit
                    def k(out, table, W: tl.constexpr):
                        bufs = table
                        x = _castpile_load_gather(bufs, W, None, out, 0, None)

                    return k
            """),
        },
        id="import in an enclosing function",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            from castpile import multicast_like
            try:
                from castpile import signal
            except ImportError:
                signal = None


            @triton.jit
            def k(out, table, W: tl.constexpr):
                bufs = multicast_like(out, table[:W])
                signal(bufs[0])
        """),
        dedent("""\
            import triton
            import triton.language as tl
            from castpile import multicast_like
            try:
                from castpile import signal
            except ImportError:
                signal = None


            @triton.jit
            def k(out, table, W: tl.constexpr):
                bufs = table
                _castpile_signal(bufs, W, None, out, 0, None)
        """),
        id="import fallback: what the except handler binds does not shadow",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            from castpile import multicast_like


            def host(bufs, table):
                x = bufs[0]
                bufs[1] = x
                return tl.sum(bufs[0:2])


            @triton.jit
            def k(out, table, W: tl.constexpr):
                bufs = multicast_like(out, table[:W])
                x = bufs[0]


            class Host:
                bufs = [1, 2]
                y = bufs[0]
        """),
        {
            "loop": dedent("""\
                import triton
                import triton.language as tl
                from castpile import multicast_like


                def host(bufs, table):
                    x = bufs[0]
                    bufs[1] = x
                    return tl.sum(bufs[0:2])


                @triton.jit
                def k(out, table, W: tl.constexpr):
                    bufs = table
                    x = _castpile_load_loop(bufs, W, None, out, 0, None)


                class Host:
                    bufs = [1, 2]
                    y = bufs[0]
            """),
            "gather": dedent("""\
                import triton
                import triton.language as tl
                from castpile import multicast_like


                def host(bufs, table):
                    x = bufs[0]
                    bufs[1] = x
                    return tl.sum(bufs[0:2])


                @triton.jit
                def k(out, table, W: tl.constexpr):
                    bufs = table
                    x = _castpile_load_gather(bufs, W, None, out, 0, None)


                class Host:
                    bufs = [1, 2]
                    y = bufs[0]
            """),
        },
        id="code outside @triton.jit is left alone",
    ),

    # Every way a module names triton.language and castpile that Python resolves statically (docs/language.md, Names).
    pytest.param(
        dedent("""\
            import triton
            import castpile
            tl = triton.language


            @triton.jit
            def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                bufs = castpile.multicast_like(out, table[:W], shape=(n,))
                offs = tl.arange(0, BLOCK)
                top = tl.max(bufs[offs], axis=0)
                x = tl.load(bufs[offs], mask=offs < 2, other=-1)
                castpile.signal(bufs[0])
        """),
        {
            "loop": dedent("""\
                import triton
                import castpile
                tl = triton.language


                @triton.jit
                def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    bufs = table
                    offs = tl.arange(0, BLOCK)
                    top = _castpile_reduce_loop(bufs, W, None, out, offs, (offs >= 0) & (offs < n), "max")
                    x = _castpile_load_loop(bufs, W, None, out, offs, (offs >= 0) & (offs < n), offs < 2, -1)
                    _castpile_signal(bufs, W, None, out, 0, (0 < n))
            """),
            "gather": dedent("""\
                import triton
                import castpile
                tl = triton.language


                @triton.jit
                def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    bufs = table
                    offs = tl.arange(0, BLOCK)
                    top = _castpile_reduce_loop(bufs, W, None, out, offs, (offs >= 0) & (offs < n), "max")
                    x = _castpile_load_gather(bufs, W, None, out, offs, (offs >= 0) & (offs < n), offs < 2, -1)
                    _castpile_signal(bufs, W, None, out, 0, (0 < n))
            """),
        },
        id="tl = triton.language",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            import castpile
            language = triton.language


            @triton.jit
            def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                bufs = castpile.multicast_like(out, table[:W], shape=(n,))
                offs = language.arange(0, BLOCK)
                top = language.max(bufs[offs], axis=0)
                x = language.load(bufs[offs], mask=offs < 2, other=-1)
                castpile.signal(bufs[0])
        """),
        {
            "loop": dedent("""\
                import triton
                import triton.language as tl
                import castpile
                language = triton.language


                @triton.jit
                def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    bufs = table
                    offs = language.arange(0, BLOCK)
                    top = _castpile_reduce_loop(bufs, W, None, out, offs, (offs >= 0) & (offs < n), "max")
                    x = _castpile_load_loop(bufs, W, None, out, offs, (offs >= 0) & (offs < n), offs < 2, -1)
                    _castpile_signal(bufs, W, None, out, 0, (0 < n))
            """),
            "gather": dedent("""\
                import triton
                import triton.language as tl
                import castpile
                language = triton.language


                @triton.jit
                def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    bufs = table
                    offs = language.arange(0, BLOCK)
                    top = _castpile_reduce_loop(bufs, W, None, out, offs, (offs >= 0) & (offs < n), "max")
                    x = _castpile_load_gather(bufs, W, None, out, offs, (offs >= 0) & (offs < n), offs < 2, -1)
                    _castpile_signal(bufs, W, None, out, 0, (0 < n))
            """),
        },
        id="language = triton.language, next to tl",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            from castpile import multicast_like, signal


            @triton.jit
            def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                bufs = multicast_like(out, table[:W], shape=(n,))
                offs = triton.language.arange(0, BLOCK)
                top = triton.language.max(bufs[offs], axis=0)
                x = triton.language.load(bufs[offs], mask=offs < 2, other=-1)
                signal(bufs[0])
        """),
        {
            "loop": dedent("""\
                import triton
                import triton.language as tl
                from castpile import multicast_like, signal


                @triton.jit
                def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    bufs = table
                    offs = triton.language.arange(0, BLOCK)
                    top = _castpile_reduce_loop(bufs, W, None, out, offs, (offs >= 0) & (offs < n), "max")
                    x = _castpile_load_loop(bufs, W, None, out, offs, (offs >= 0) & (offs < n), offs < 2, -1)
                    _castpile_signal(bufs, W, None, out, 0, (0 < n))
            """),
            "gather": dedent("""\
                import triton
                import triton.language as tl
                from castpile import multicast_like, signal


                @triton.jit
                def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    bufs = table
                    offs = triton.language.arange(0, BLOCK)
                    top = _castpile_reduce_loop(bufs, W, None, out, offs, (offs >= 0) & (offs < n), "max")
                    x = _castpile_load_gather(bufs, W, None, out, offs, (offs >= 0) & (offs < n), offs < 2, -1)
                    _castpile_signal(bufs, W, None, out, 0, (0 < n))
            """),
        },
        id="import triton; triton.language.max",
    ),
    pytest.param(
        dedent("""\
            import triton
            from triton import language as tl
            import castpile as cp


            @triton.jit
            def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                bufs = cp.multicast_like(out, table[:W], shape=(n,))
                offs = tl.arange(0, BLOCK)
                top = tl.max(bufs[offs], axis=0)
                x = tl.load(bufs[offs], mask=offs < 2, other=-1)
                cp.signal(bufs[0])
        """),
        {
            "loop": dedent("""\
                import triton
                from triton import language as tl
                import castpile as cp


                @triton.jit
                def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    bufs = table
                    offs = tl.arange(0, BLOCK)
                    top = _castpile_reduce_loop(bufs, W, None, out, offs, (offs >= 0) & (offs < n), "max")
                    x = _castpile_load_loop(bufs, W, None, out, offs, (offs >= 0) & (offs < n), offs < 2, -1)
                    _castpile_signal(bufs, W, None, out, 0, (0 < n))
            """),
            "gather": dedent("""\
                import triton
                from triton import language as tl
                import castpile as cp


                @triton.jit
                def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    bufs = table
                    offs = tl.arange(0, BLOCK)
                    top = _castpile_reduce_loop(bufs, W, None, out, offs, (offs >= 0) & (offs < n), "max")
                    x = _castpile_load_gather(bufs, W, None, out, offs, (offs >= 0) & (offs < n), offs < 2, -1)
                    _castpile_signal(bufs, W, None, out, 0, (0 < n))
            """),
        },
        id="from triton import language as tl; import castpile as cp",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            import castpile
            cp = castpile
            mcl = cp.multicast_like
            sig = castpile.signal
            ld = tl.load
            mx = tl.max


            @triton.jit
            def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                bufs = mcl(out, table[:W], shape=(n,))
                offs = tl.arange(0, BLOCK)
                top = mx(bufs[offs], axis=0)
                x = ld(bufs[offs], mask=offs < 2, other=-1)
                sig(bufs[0])
        """),
        {
            "loop": dedent("""\
                import triton
                import triton.language as tl
                import castpile
                cp = castpile
                mcl = cp.multicast_like
                sig = castpile.signal
                ld = tl.load
                mx = tl.max


                @triton.jit
                def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    bufs = table
                    offs = tl.arange(0, BLOCK)
                    top = _castpile_reduce_loop(bufs, W, None, out, offs, (offs >= 0) & (offs < n), "max")
                    x = _castpile_load_loop(bufs, W, None, out, offs, (offs >= 0) & (offs < n), offs < 2, -1)
                    _castpile_signal(bufs, W, None, out, 0, (0 < n))
            """),
            "gather": dedent("""\
                import triton
                import triton.language as tl
                import castpile
                cp = castpile
                mcl = cp.multicast_like
                sig = castpile.signal
                ld = tl.load
                mx = tl.max


                @triton.jit
                def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    bufs = table
                    offs = tl.arange(0, BLOCK)
                    top = _castpile_reduce_loop(bufs, W, None, out, offs, (offs >= 0) & (offs < n), "max")
                    x = _castpile_load_gather(bufs, W, None, out, offs, (offs >= 0) & (offs < n), offs < 2, -1)
                    _castpile_signal(bufs, W, None, out, 0, (0 < n))
            """),
        },
        id="cp = castpile, mcl = cp.multicast_like, sig = castpile.signal, ld = tl.load, mx = tl.max",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            import castpile
            T = triton
            L = T.language


            @triton.jit
            def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                bufs = castpile.multicast_like(out, table[:W], shape=(n,))
                offs = L.arange(0, BLOCK)
                top = L.max(bufs[offs], axis=0)
                x = L.load(bufs[offs], mask=offs < 2, other=-1)
                castpile.signal(bufs[0])
        """),
        {
            "loop": dedent("""\
                import triton
                import triton.language as tl
                import castpile
                T = triton
                L = T.language


                @triton.jit
                def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    bufs = table
                    offs = L.arange(0, BLOCK)
                    top = _castpile_reduce_loop(bufs, W, None, out, offs, (offs >= 0) & (offs < n), "max")
                    x = _castpile_load_loop(bufs, W, None, out, offs, (offs >= 0) & (offs < n), offs < 2, -1)
                    _castpile_signal(bufs, W, None, out, 0, (0 < n))
            """),
            "gather": dedent("""\
                import triton
                import triton.language as tl
                import castpile
                T = triton
                L = T.language


                @triton.jit
                def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    bufs = table
                    offs = L.arange(0, BLOCK)
                    top = _castpile_reduce_loop(bufs, W, None, out, offs, (offs >= 0) & (offs < n), "max")
                    x = _castpile_load_gather(bufs, W, None, out, offs, (offs >= 0) & (offs < n), offs < 2, -1)
                    _castpile_signal(bufs, W, None, out, 0, (0 < n))
            """),
        },
        id="aliases of aliases: T = triton, L = T.language",
    ),
    pytest.param(
        dedent("""\
            import triton
            import castpile
            tl: object = triton.language
            print(cp := castpile)


            @triton.jit
            def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                bufs = cp.multicast_like(out, table[:W], shape=(n,))
                offs = tl.arange(0, BLOCK)
                top = tl.max(bufs[offs], axis=0)
                x = tl.load(bufs[offs], mask=offs < 2, other=-1)
                cp.signal(bufs[0])
        """),
        {
            "loop": dedent("""\
                import triton
                import castpile
                tl: object = triton.language
                print(cp := castpile)


                @triton.jit
                def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    bufs = table
                    offs = tl.arange(0, BLOCK)
                    top = _castpile_reduce_loop(bufs, W, None, out, offs, (offs >= 0) & (offs < n), "max")
                    x = _castpile_load_loop(bufs, W, None, out, offs, (offs >= 0) & (offs < n), offs < 2, -1)
                    _castpile_signal(bufs, W, None, out, 0, (0 < n))
            """),
            "gather": dedent("""\
                import triton
                import castpile
                tl: object = triton.language
                print(cp := castpile)


                @triton.jit
                def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    bufs = table
                    offs = tl.arange(0, BLOCK)
                    top = _castpile_reduce_loop(bufs, W, None, out, offs, (offs >= 0) & (offs < n), "max")
                    x = _castpile_load_gather(bufs, W, None, out, offs, (offs >= 0) & (offs < n), offs < 2, -1)
                    _castpile_signal(bufs, W, None, out, 0, (0 < n))
            """),
        },
        id="an annotated alias and one by :=",
    ),
    pytest.param(
        dedent("""\
            import triton
            import castpile
            try:
                import triton.language as tl
            except ImportError:
                tl = None


            @triton.jit
            def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                bufs = castpile.multicast_like(out, table[:W], shape=(n,))
                offs = tl.arange(0, BLOCK)
                top = tl.max(bufs[offs], axis=0)
                x = tl.load(bufs[offs], mask=offs < 2, other=-1)
                castpile.signal(bufs[0])
        """),
        {
            "loop": dedent("""\
                import triton
                import castpile
                try:
                    import triton.language as tl
                except ImportError:
                    tl = None


                @triton.jit
                def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    bufs = table
                    offs = tl.arange(0, BLOCK)
                    top = _castpile_reduce_loop(bufs, W, None, out, offs, (offs >= 0) & (offs < n), "max")
                    x = _castpile_load_loop(bufs, W, None, out, offs, (offs >= 0) & (offs < n), offs < 2, -1)
                    _castpile_signal(bufs, W, None, out, 0, (0 < n))
            """),
            "gather": dedent("""\
                import triton
                import castpile
                try:
                    import triton.language as tl
                except ImportError:
                    tl = None


                @triton.jit
                def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    bufs = table
                    offs = tl.arange(0, BLOCK)
                    top = _castpile_reduce_loop(bufs, W, None, out, offs, (offs >= 0) & (offs < n), "max")
                    x = _castpile_load_gather(bufs, W, None, out, offs, (offs >= 0) & (offs < n), offs < 2, -1)
                    _castpile_signal(bufs, W, None, out, 0, (0 < n))
            """),
        },
        id="an import fallback: except ImportError does not shadow the try body's import",
    ),
    pytest.param(
        dedent("""\
            import triton
            import castpile
            if castpile:
                import triton.language as tl
            else:
                from triton import language as tl


            @triton.jit
            def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                bufs = castpile.multicast_like(out, table[:W], shape=(n,))
                offs = tl.arange(0, BLOCK)
                top = tl.max(bufs[offs], axis=0)
                x = tl.load(bufs[offs], mask=offs < 2, other=-1)
                castpile.signal(bufs[0])
        """),
        {
            "loop": dedent("""\
                import triton
                import castpile
                if castpile:
                    import triton.language as tl
                else:
                    from triton import language as tl


                @triton.jit
                def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    bufs = table
                    offs = tl.arange(0, BLOCK)
                    top = _castpile_reduce_loop(bufs, W, None, out, offs, (offs >= 0) & (offs < n), "max")
                    x = _castpile_load_loop(bufs, W, None, out, offs, (offs >= 0) & (offs < n), offs < 2, -1)
                    _castpile_signal(bufs, W, None, out, 0, (0 < n))
            """),
            "gather": dedent("""\
                import triton
                import castpile
                if castpile:
                    import triton.language as tl
                else:
                    from triton import language as tl


                @triton.jit
                def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    bufs = table
                    offs = tl.arange(0, BLOCK)
                    top = _castpile_reduce_loop(bufs, W, None, out, offs, (offs >= 0) & (offs < n), "max")
                    x = _castpile_load_gather(bufs, W, None, out, offs, (offs >= 0) & (offs < n), offs < 2, -1)
                    _castpile_signal(bufs, W, None, out, 0, (0 < n))
            """),
        },
        id="if/else imports that agree",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            import castpile


            def make():
                lang = triton.language
                mcl = castpile.multicast_like

                @triton.jit
                def k(out, table, W: tl.constexpr):
                    bufs = mcl(out, table[:W])
                    top = lang.max(bufs[0], axis=0)

                return k
        """),
        dedent("""\
            import triton
            import triton.language as tl
            import castpile


            def make():
                lang = triton.language
                mcl = castpile.multicast_like

                @triton.jit
                def k(out, table, W: tl.constexpr):
                    bufs = table
                    top = _castpile_reduce_loop(bufs, W, None, out, 0, None, "max")

                return k
        """),
        id="aliases in an enclosing function",
    ),
]


# Files castpile must return byte for byte: nothing in them is castpile's.
LEFT_ALONE = [
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            from castpile import multicast_like


            def multicast_like(example, tile):
                return tile


            @triton.jit
            def k(out, table, W: tl.constexpr):
                bufs = multicast_like(out, table[:W])
                x = bufs[0]
        """),
        id="a lookalike module-level function named multicast_like",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            from castpile import multicast_like


            def make():
                def multicast_like(a, b):
                    return b

                @triton.jit
                def k(out, table, W: tl.constexpr):
                    bufs = multicast_like(out, table[:W])
                    x = bufs[0]

                return k
        """),
        id="a lookalike local function of an enclosing function",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            from castpile import multicast_like


            @triton.jit
            def k(out, table, multicast_like, W: tl.constexpr):
                bufs = multicast_like(out, table[:W])
                x = bufs[0]
        """),
        id="a parameter shadowing the import",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            from castpile import multicast_like


            def make(multicast_like):
                @triton.jit
                def k(out, table, W: tl.constexpr):
                    bufs = multicast_like(out, table[:W])
                    x = bufs[0]

                return k
        """),
        id="a parameter of an enclosing function shadowing the import",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            from castpile import multicast_like


            @triton.jit
            def k(out, table, W: tl.constexpr):
                multicast_like = tl.load
                bufs = multicast_like(out, table[:W])
                x = bufs[0]
        """),
        id="a local variable shadowing the import",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            import castpile
            import other


            @triton.jit
            def k(out, table, W: tl.constexpr):
                bufs = other.multicast_like(out, table[:W])
                x = bufs[0]
                other.signal(bufs[0])
                other.wait(out)
        """),
        id="other.multicast_like, other.signal, other.wait",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl


            @triton.jit
            def k(out, table, wait, W: tl.constexpr):
                def multicast_like(a, b):
                    return b
                bufs = multicast_like(out, table[:W])
                wait(bufs[0])
        """),
        id="a local def named multicast_like and a parameter named wait, no castpile import",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            import castpile as cp
            import other
            multicast_like = other.multicast_like
            signal = other.signal
            cp = other


            @triton.jit
            def k(out, table, W: tl.constexpr):
                bufs = multicast_like(out, table[:W])
                more = cp.multicast_like(out, table[:W])
                signal(bufs[0])
        """),
        id="aliases of another module's names",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            from castpile import *


            @triton.jit
            def k(out, table, W: tl.constexpr):
                bufs = multicast_like(out, table[:W])
                x = bufs[0]
                signal(bufs[0])
                wait(out)
        """),
        id="star import",
    ),
]


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize(("source", "expected"), FILE_CASES)
def test_whole_files(source, expected, strategy):
    check_whole_file(source, expected, strategy)


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize("source", LEFT_ALONE)
def test_left_alone_byte_for_byte(source, strategy):
    check_left_alone(source, strategy)


def test_the_cases_compile_for_sm90(tmp_path):
    check_cases_compile_for_sm90(tmp_path, file_cases=FILE_CASES)
