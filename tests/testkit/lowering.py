"""The lowering tests' kit (tests/lowering/): the kernel a case's lines sit in, and the checks every feature file runs.

A kernel case is a few lines of a kernel body; :func:`kernel_module` puts them in this kernel::

    import triton
    import triton.language as tl
    import castpile
    from castpile import multicast_like


    @triton.jit
    def k(out, table, tile, pm, ptrs, idx, ctr, n, m, i, j, v,
          W: tl.constexpr, C: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)

``tile`` and ``pm`` are pointers where a case indexes ``table``, and a rank-0 tile (one address) and its
``ptr_mask`` where it binds ``tile``.  A case's expected text is one string where castpile writes the same
lines under both strategies, or ``{"loop": ..., "gather": ...}`` where they differ.  Each check compares
everything before the appended helpers, so the unchanged lines around a case are checked too.

Every expected value was read once from castpile's output and checked by hand against docs/language.md
(the helpers' parameter order is that of castpile's helpers.py: ``src, count, smask, example, offs,
bounds``, then the user's value arguments by position in the contract's order, then options by keyword).
"""

import re

import castpile
from castpile.options import VERSION
from compile_sm90 import Job, compile_for_sm90, signature

HEADER = (
    "import triton\n"
    "import triton.language as tl\n"
    "import castpile\n"
    "from castpile import multicast_like\n"
    "\n"
    "\n"
    "@triton.jit\n"
    "def k(out, table, tile, pm, ptrs, idx, ctr, n, m, i, j, v,\n"
    "      W: tl.constexpr, C: tl.constexpr, BLOCK: tl.constexpr):\n"
    "    offs = tl.arange(0, BLOCK)\n"
)

HELPERS_MARK = "\n\n# ---- castpile "
"""What starts the appended helpers, right after the last input line."""

REMOTE_TAIL = f"\n\n# ---- castpile {VERSION} the kernels with remote= bindings, launched with NVSHMEM ----\nk = _castpile_remote_kernel(k)\n"
"""How a module with a remote kernel ``k`` ends: ``k`` rebound, wrapped for NVSHMEM."""


def transpile(source: str, strategy: str, debug_waits: float | None = None) -> str:
    return castpile.transpile(source.encode(), "k.py", strategy=strategy, debug_waits=debug_waits).decode()


def indent(lines: str, by: str = "    ") -> str:
    """``lines`` indented by ``by`` (where castpile keeps a rewritten expression's line count, the
    closing parenthesis it moves to the next line is indented as the code above it)."""
    return "".join(by + line + "\n" for line in lines.splitlines())


def kernel_module(body: str) -> str:
    """``HEADER`` with ``body``'s lines as the rest of the kernel."""
    return HEADER + indent(body)


def expected_under(expected: str | dict[str, str], strategy: str) -> str:
    """A case's expected text under ``strategy``: the one text, or that strategy's."""
    return expected[strategy] if isinstance(expected, dict) else expected


def head_and_helpers(out: str, newline: str = "\n") -> tuple[str, list[str]]:
    """The rewritten module before the appended helpers, and the names of the helpers defined after it."""
    head, mark, tail = out.partition(HELPERS_MARK.replace("\n", newline))
    assert mark, "no helpers appended"
    return head, re.findall(r"^def (\w+)\(", tail, re.M)


def check_kernel_lines(source: str, expected, strategy: str, debug_waits: float | None = None) -> None:
    head, _ = head_and_helpers(transpile(kernel_module(source), strategy, debug_waits))
    want = kernel_module(expected_under(expected, strategy))
    assert head.splitlines() == want.splitlines()
    assert head == want


def check_remote_kernel_lines(source: str, expected, strategy: str, debug_waits: float | None = None) -> None:
    """The kernel's lines, and the kernel wrapped after the helpers."""
    out = transpile(kernel_module(source), strategy, debug_waits)
    head, _ = head_and_helpers(out)
    assert head == kernel_module(expected_under(expected, strategy))
    assert out.endswith(REMOTE_TAIL) and out.count("_castpile_remote_kernel(") == 2  # defined, then called once


def check_whole_file(source: str, expected, strategy: str) -> None:
    newline = "\r\n" if "\r\n" in source else "\n"
    head, _ = head_and_helpers(transpile(source, strategy), newline)
    want = expected_under(expected, strategy)
    assert head.splitlines() == want.splitlines()
    assert head == want


def check_left_alone(source: str, strategy: str) -> None:
    assert transpile(source, strategy) == source


# HEADER's parameters; `tile` and `pm` are pointers in the table cases, and in the tile cases a
# rank-0 tile (one address) and its ptr_mask.
CASE_TYPES = {
    "out": "*i32",
    "table": "*i64",
    "tile": "*i64",
    "pm": "*i32",
    "ptrs": "*i32",
    "idx": "*i32",
    "ctr": "*i32",
}
TILE_CASE_TYPES = {**CASE_TYPES, "tile": "i64", "pm": "i1"}
CASE_CONSTEXPRS = {"W": 3, "C": 2, "BLOCK": 16}


def check_cases_compile_for_sm90(
    tmp_path, kernel_cases=(), file_cases=(), remote_cases=(), ptxas_refuses=None, debug_waits=None
):
    """What the golden lines call is real Triton: every case's source, lowered under both strategies, compiles
    for sm_90 (remote ones up to linking NVSHMEM; a file case's kernel made by a function is that function's).
    ``ptxas_refuses`` maps a case's id to what ptxas says of options plain Triton refuses too: they must get that far.
    ``debug_waits``: transpiled with debug-mode waits.
    Files that launch their kernel at import cannot be imported by the compiler's child (no GPU driver):
    tests/test_identity.py runs such modules in the interpreter and compiles their kernels."""
    ptxas_refuses = ptxas_refuses or {}
    cases = [(case.id, kernel_module(case.values[0]), False) for case in kernel_cases]
    cases += [
        (case.id, case.values[0], False)
        for case in file_cases
        if "define_helpers(" not in transpile(case.values[0], "loop")
    ]
    cases += [(case.id, kernel_module(case.values[0]), True) for case in remote_cases]
    jobs = []
    for k, (name, source, remote) in enumerate(cases):
        types = TILE_CASE_TYPES if re.search(r"\btile\b", source) else CASE_TYPES
        kernel = "make()" if "\ndef make():" in source else "k"
        constexprs = {c: value for c, value in CASE_CONSTEXPRS.items() if re.search(rf"\b{c}: tl.constexpr", source)}
        for strategy in castpile.STRATEGIES:
            path = tmp_path / f"case{k}_{strategy}.py"
            path.write_text(transpile(source, strategy, debug_waits), newline="")
            jobs.append(
                Job(
                    path, kernel, signature(source, "k", types), constexprs, name=f"{name} [{strategy}]", nvshmem=remote
                )
            )
    results = compile_for_sm90(jobs, tmp_path, processes=2)
    failures = {}
    for name, result in results.items():
        refused = ptxas_refuses.get(name.rsplit(" [", 1)[0])
        if refused is None and not result.ok:
            failures[name] = result.error
        elif refused is not None and (result.ok or refused not in result.error):
            failures[name] = f"expected ptxas to refuse it with {refused!r}, got: {result.error}"
    assert not failures, "\n\n".join(f"{name}:\n{error}" for name, error in failures.items())
