"""Lowering, context by context: a few kernel lines in, the exact lines castpile must write out.

The pairs live in tests/lowering_cases.py (golden values read once from castpile and
checked by hand against docs/language.md).  Each test compares everything before the
appended helpers, so the unchanged lines around a case are checked too; a few tests
check which helpers get appended, and one that the lowered cases compile for sm_90.
"""

import re

import pytest

import castpile
from compile_sm90 import Job, compile_for_sm90, signature
from lowering_cases import (FILE_CASES, HELPERS_MARK, KERNEL_CASES, LEFT_ALONE, REMOTE_CASES, REMOTE_TAIL, expected_for,
                            kernel_module)


def transpile(source: str, strategy: str) -> str:
    return castpile.transpile(source.encode(), "k.py", strategy=strategy).decode()


def head_and_helpers(out: str) -> tuple[str, list[str]]:
    """The rewritten module before the appended helpers, and the names of the helpers defined after it."""
    head, mark, tail = out.partition(HELPERS_MARK)
    assert mark, "no helpers appended"
    return head, re.findall(r"^def (\w+)\(", tail, re.M)


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize("source,expected", [c[1:] for c in KERNEL_CASES], ids=[c[0] for c in KERNEL_CASES])
def test_kernel_lines(source, expected, strategy):
    head, _ = head_and_helpers(transpile(kernel_module(source), strategy))
    assert head.splitlines() == kernel_module(expected_for(expected, strategy)).splitlines()
    assert head == kernel_module(expected_for(expected, strategy))


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize("source,expected", [c[1:] for c in REMOTE_CASES], ids=[c[0] for c in REMOTE_CASES])
def test_remote_kernel_lines(source, expected, strategy):
    """remote="nvshmem": the same lines under both strategies, and the kernel wrapped after the helpers."""
    out = transpile(kernel_module(source), strategy)
    head, _ = head_and_helpers(out)
    assert head == kernel_module(expected_for(expected, strategy))
    assert out.endswith(REMOTE_TAIL) and out.count("_castpile_remote_kernel(") == 2  # defined, then called once


def test_a_remote_kernel_named_with_the_helpers_prefix_keeps_its_name():
    source = kernel_module('bufs = multicast_like(out, table[:W], remote="nvshmem")\nx = bufs[offs]\n')
    out = transpile(source.replace("def k(", "def _castpile_k("), "loop")
    assert out.endswith(" launched with NVSHMEM ----\n_castpile_k = _castpile2_remote_kernel(_castpile_k)\n")
    assert "\ndef _castpile2_remote_kernel(" in out and "\n_castpile2_nvshmem = _castpile2_nvshmem_functions()\n" in out


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
def test_remote_none_is_no_remote(strategy):
    source = "bufs = multicast_like(out, table[:W], shape=(n,){})\nx = bufs[offs]\n"
    assert transpile(kernel_module(source.format(", remote=None")), strategy) == transpile(
        kernel_module(source.format("")), strategy)  # the binding's line is replaced either way


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize("source,expected", [c[1:] for c in FILE_CASES], ids=[c[0] for c in FILE_CASES])
def test_whole_files(source, expected, strategy):
    out = transpile(source, strategy)
    newline = "\r\n" if "\r\n" in source else "\n"
    head, mark, _ = out.partition(HELPERS_MARK.replace("\n", newline))
    assert mark
    assert head.splitlines() == expected_for(expected, strategy).splitlines()
    assert head == expected_for(expected, strategy)


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize("source", [c[1] for c in LEFT_ALONE], ids=[c[0] for c in LEFT_ALONE])
def test_left_alone_byte_for_byte(source, strategy):
    assert transpile(source, strategy) == source


# Which helpers get appended: those called, with the helpers they call (castpile's helpers.py), no others.
LOAD_LOOP = {"load_loop", "offsets", "positions", "zeros", "prepend", "peer", "lane_mask"}
LOAD_GATHER = {"load_gather", "pointers", "offsets", "prepend"}
STORE_LOOP = {"store_loop", "offsets", "positions", "peer", "slice", "leading_ones", "lane_mask"}
STORE_GATHER = {"store_gather", "pointers", "full", "offsets", "prepend"}
REDUCE_LOOP = {"reduce_loop", "offsets", "peer", "lane_mask", "apply", "apply_one", "step_count", "step", "operand",
               "accumulator", "fold", "identity", "folded", "keeps_zero"}
HELPERS = [
    ("x = bufs[offs]\n", LOAD_LOOP, LOAD_GATHER),
    ("bufs[offs] = v\n", STORE_LOOP, STORE_GATHER),
    ("bufs[offs] += v\n", LOAD_LOOP | STORE_LOOP, LOAD_GATHER | STORE_GATHER),
    ("x = bufs[tl.atomic_add(ctr, 1)]\n", LOAD_LOOP | {"index"}, LOAD_GATHER | {"index"}),
    (  # a temporary, not _castpile_index
        "bufs[tl.atomic_add(ctr, 1)] = v\n", STORE_LOOP, STORE_GATHER,
    ),
    ("s = tl.sum(bufs[offs], axis=0)\n", REDUCE_LOOP, REDUCE_LOOP),  # a table's: buffer by buffer under both
    (
        "t = multicast_like(out, tile)\ns = tl.sum(t[offs], axis=0)\n",
        {"reduce_gather", "pointers", "offsets", "prepend", "apply", "apply_one", "step_count", "step", "operand",
         "accumulator", "identity", "first_max", "first_min"},
        {"reduce_gather", "pointers", "offsets", "prepend", "apply", "apply_one", "step_count", "step", "operand",
         "accumulator", "identity", "first_max", "first_min"},
    ),
    (
        "x = tl.atomic_cas(bufs[offs], 0, v)\n",
        {"atomic_cas_loop", "offsets", "positions", "zeros", "prepend", "peer", "cas", "full", "lane_mask", "slice",
         "leading_ones"},
        {"atomic_cas_gather", "pointers", "cas", "full", "offsets", "prepend"},
    ),
    (
        "castpile.signal(bufs[0])\n",
        {"signal", "pointers", "cas", "full", "offsets", "prepend", "any"},
        {"signal", "pointers", "cas", "full", "offsets", "prepend", "any"},
    ),
    (
        "castpile.wait(ptrs + offs)\n",
        {"wait_flags", "lane_mask", "any"},
        {"wait_flags", "lane_mask", "any"},
    ),
]


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize("line,loop,gather", HELPERS, ids=[h[0].strip() for h in HELPERS])
def test_appended_helpers(line, loop, gather, strategy):
    source = kernel_module("bufs = multicast_like(out, table[:W], shape=(n,))\n" + line)
    _, helpers = head_and_helpers(transpile(source, strategy))
    expected = loop if strategy == "loop" else gather
    assert sorted(helpers) == sorted(f"_castpile_{name}" for name in expected)


def test_helpers_renamed_with_the_free_prefix():
    source = kernel_module("_castpile_mine = 1\nbufs = multicast_like(out, table[:W])\nx = bufs[offs]\n")
    _, helpers = head_and_helpers(transpile(source, "gather"))
    assert sorted(helpers) == sorted(f"_castpile2_{name}" for name in LOAD_GATHER)


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
def test_named_slice_is_read_where_it_was_taken(strategy):
    """``rows = table[:W]``, then ``table`` rebound: the stack is still the slice ``rows`` holds."""
    source = kernel_module("rows = table[:W]\ntable = out\nbufs = multicast_like(out, rows)\nx = bufs[offs]\n")
    head, _ = head_and_helpers(transpile(source, strategy))
    assert "    bufs = table\n" not in head


# HEADER's parameters; `tile` and `pm` are pointers in the table cases, and in the tile cases a
# rank-0 tile (one address) and its ptr_mask.
CASE_TYPES = {
    "out": "*i32", "table": "*i64", "tile": "*i64", "pm": "*i32", "ptrs": "*i32", "idx": "*i32", "ctr": "*i32",
}
TILE_CASE_TYPES = {**CASE_TYPES, "tile": "i64", "pm": "i1"}
CASE_CONSTEXPRS = {"W": 3, "C": 2, "BLOCK": 16}
# Cases whose options plain Triton refuses too (ptxas: the message); they must get that far.
PTXAS_REFUSES = {"tl.load with a positional mask and options": "Modifier '.volatile' cannot be combined with modifier '.cg'"}


def test_the_lowered_cases_compile_for_sm90(tmp_path):
    """What the golden lines call is real Triton: every kernel, file and remote case compiles under both
    strategies (remote ones up to linking NVSHMEM; a file case's kernel made by a function is that function's)."""
    jobs = []
    cases = [(name, kernel_module(source), False) for name, source, _ in KERNEL_CASES]
    # Files that launch their kernel at import cannot be imported by the compiler's child (no GPU driver):
    # tests/test_identity.py runs such modules in the interpreter and compiles their kernels.
    cases += [(name, source, False) for name, source, _ in FILE_CASES if "define_helpers(" not in transpile(source, "loop")]
    cases += [(name, kernel_module(source), True) for name, source, _ in REMOTE_CASES]
    for k, (name, source, remote) in enumerate(cases):
        types = TILE_CASE_TYPES if re.search(r"\btile\b", source) else CASE_TYPES
        kernel = "make()" if "\ndef make():" in source else "k"
        constexprs = {name: value for name, value in CASE_CONSTEXPRS.items() if re.search(rf"\b{name}: tl.constexpr", source)}
        for strategy in castpile.STRATEGIES:
            path = tmp_path / f"case{k}_{strategy}.py"
            path.write_text(transpile(source, strategy), newline="")
            jobs.append(Job(path, kernel, signature(source, "k", types), constexprs, name=f"{name} [{strategy}]",
                            nvshmem=remote))
    results = compile_for_sm90(jobs, tmp_path, processes=2)
    failures = {}
    for name, result in results.items():
        refused = PTXAS_REFUSES.get(name.rsplit(" [", 1)[0])
        if refused is None and not result.ok:
            failures[name] = result.error
        elif refused is not None and (result.ok or refused not in result.error):
            failures[name] = f"expected ptxas to refuse it with {refused!r}, got: {result.error}"
    assert not failures, "\n\n".join(f"{name}:\n{error}" for name, error in failures.items())


def test_the_readmes_before_snippet_transpiles_to_its_after_snippet():
    """README.md shows a whole module before and after: the first is valid input, the second castpile's output."""
    from pathlib import Path

    text = (Path(__file__).parents[1] / "README.md").read_text()
    before, after = re.findall(r"```python\n(.*?)```", text, re.S)[:2]
    head, _ = head_and_helpers(transpile(before, "loop"))
    assert head == after
