"""Language v1.3's synchronization: counting semaphores, waits that return what they saw, signals on plain
pointers, and compile-time option values in every spelling, run against torch and compiled for sm_90.

tests/kernels_v13_sync.py is transpiled once per strategy and run in the interpreter (kernels that wait run
in a forked simulated rank under a timeout, so a wait that never returns fails instead of hanging).  The
spelling tier writes one kernel per spelling of a compile-time value (a literal, a constexpr parameter, a
conditional of constexprs, a constexpr global, a module's attribute, a local annotated ``tl.constexpr``),
each passing it to every keyword of every castpile call, and compiles it under both strategies and in
debug mode (``CASTPILE_DEBUG_WAITS``): Triton's GPU compiler refuses a string held in a run-time local,
which the interpreter runs.
"""

import ast
import time
from pathlib import Path

import pytest
import torch

import castpile
from castpile.gpu import sim
from compile_sm90 import Job, compile_for_sm90, signature
from testkit import address_table, import_file, padded, transpiled_module
from testkit.diagnostics import diagnostics_of

KERNELS = Path(__file__).with_name("kernels_v13_sync.py")


@pytest.fixture(scope="module", params=castpile.STRATEGIES)
def k(request, tmp_path_factory):
    """The transpiled kernels module for one strategy."""
    return transpiled_module(KERNELS, request.param, tmp_path_factory.mktemp(request.param))


def in_one_rank(body):
    """``body()`` in a forked simulated rank under a timeout (a wait that never returns fails the test)."""
    [result] = sim.run(lambda rank: body(), 1, timeout=60)
    return result


# -- counting semaphores -------------------------------------------------------------------------------


@pytest.mark.parametrize("form", [0, 1])
@pytest.mark.parametrize(("raised", "n", "programs"), [(5, 2, 2), (2, 1, 2), (7, 3, 2), (4, 4, 1)])
def test_a_counting_semaphore_lets_k_over_n_waits_return(k, form, raised, n, programs):
    def body():
        flag = torch.tensor([raised], dtype=torch.int32)
        seen = torch.full((programs,), -1, dtype=torch.int32)
        k.take_counts[(programs,)](flag, seen, n, form)
        return flag, seen

    flag, seen = in_one_rank(body)
    assert flag.item() == raised - programs * n, "a count was lost or taken twice"
    # the interpreter runs the programs in order: each saw what the ones before it left
    assert seen.tolist() == [raised - p * n for p in range(programs)]


def test_a_wait_returns_what_it_saw_shaped_as_the_access(k):
    w, block = 3, 4
    flags = [torch.tensor([2 + p, 5, 1 + p, 9], dtype=torch.int32) for p in range(w)]
    before = torch.stack(flags).clone()

    def body(reset):
        for f, b in zip(flags, before):
            f.copy_(b)
        out = torch.full((padded(w), block), -1, dtype=torch.int32)
        k.seen_stack[(1,)](out, address_table(flags), 1, w, padded(w), block, reset)
        return out, torch.stack(flags)

    for reset in (False, True):
        out, after = in_one_rank(lambda: body(reset))
        expected = torch.zeros(padded(w), block, dtype=torch.int32)
        expected[:w] = before  # the padded buffer's row reads 0
        assert torch.equal(out, expected)
        assert torch.equal(after, torch.zeros_like(before) if reset else before)


def test_a_one_peer_wait_returns_a_scalar_and_takes_its_count(k):
    flags = [torch.tensor([3], dtype=torch.int32), torch.tensor([6], dtype=torch.int32)]

    def body():
        out = torch.full((1,), -1, dtype=torch.int32)
        k.seen_one_peer[(1,)](out, address_table(flags), 1, 4)
        return out, flags[1].clone()

    out, flag = in_one_rank(body)
    assert out.item() == 6 and flag.item() == 2 and flags[0].item() == 3


@pytest.mark.parametrize("raised", [1, 3])
def test_a_constexpr_decrement_that_is_false_leaves_the_wait_as_it_was(k, raised):
    def body(counting):
        flag = torch.tensor([raised], dtype=torch.int32)
        seen = torch.full((1,), -1, dtype=torch.int32)
        k.wait_maybe_counting[(1,)](flag, seen, 1, counting)
        return flag.item(), seen.item()

    assert in_one_rank(lambda: body(True)) == (raised - 1, raised)  # took one count
    if raised == 1:  # flag == 1: the default comparison holds, and the default reset sets the flag to 0
        assert in_one_rank(lambda: body(False)) == (0, 1)
    else:  # flag 3 != 1: a wait with the default comparison ("eq") never returns
        with pytest.raises(sim.RankTimeout):
            sim.run(lambda rank: body(False), 1, timeout=4)


@pytest.mark.parametrize(("world", "late"), [(3, 0), (4, 3), (8, 0), (8, 5)])
def test_ranks_that_take_from_one_semaphore_at_once_take_each_count_once(k, world, late):
    takes = 3
    pads = sim.symmetric_scratch(world, (1,), torch.int32)

    def body(rank):
        if rank == late:
            time.sleep(0.3)
        pad = pads[rank]
        if rank == 0:
            k.raise_root[(1,)](pad.tensor, pad.ptrs, (world - 1) * takes)
            return None
        seen = torch.full((takes,), -1, dtype=torch.int32)
        k.take_from_root[(1,)](pad.tensor, pad.ptrs, seen, takes)
        return seen

    outs = sim.run(body, world, timeout=120)
    seen = sorted(v for out in outs[1:] for v in out.tolist())
    # each take swapped the count it saw for one less: every count from (W - 1) * takes down to 1 was seen once
    assert seen == list(range(1, (world - 1) * takes + 1)), seen
    assert pads[0].tensor.item() == 0


def test_a_used_wait_evaluates_its_values_in_the_order_written(k):
    def body():
        flags = torch.tensor([3, 3], dtype=torch.int32)
        counters = torch.tensor([0, 3], dtype=torch.int32)  # the value's bump gives 3: the flags' value
        seen = torch.full((2,), -1, dtype=torch.int32)
        k.seen_in_written_order[(1,)](flags, counters, seen)
        return flags.tolist(), counters.tolist(), seen.tolist()

    assert in_one_rank(body) == ([0, 0], [1, 4], [3, 3])


# -- signals on plain pointers ---------------------------------------------------------------------------


@pytest.mark.parametrize(("op", "cmp"), [("set", "eq"), ("add", "ge"), ("add", "eq"), ("set", "le")])
def test_signals_and_waits_on_local_flags(k, op, cmp):
    block, n = 8, 5

    def body():
        flags = torch.zeros(block + 1, dtype=torch.int32)
        seen = torch.full((block + 1,), -1, dtype=torch.int32)
        k.local_flags[(1,)](flags, seen, n, block, op, cmp)
        return flags, seen

    flags, seen = in_one_rank(body)
    expected_flags = torch.zeros(block + 1, dtype=torch.int32)
    expected_flags[:n] = 1  # set to 1, or 0 + 1; the scalar flag ends reset to 0
    assert torch.equal(flags, expected_flags)
    expected_seen = torch.full((block + 1,), -1, dtype=torch.int32)
    expected_seen[:n] = 1
    expected_seen[block] = 2
    assert torch.equal(seen, expected_seen)


# -- compile-time option values --------------------------------------------------------------------------


def test_options_from_constexpr_parameters_run(k):
    def body():
        flags = torch.zeros(1, dtype=torch.int32)
        k.options_from_parameters[(1,)](flags, address_table([flags]), 0, "add", "ge", "release", "sys", 1)
        return flags

    assert in_one_rank(body).tolist() == [0]  # raised by the add, reset to 0 by the wait


@pytest.mark.parametrize(
    ("option", "bad", "allowed"),
    [
        ("OP", "sub", '"set", "add"'),
        ("CMP", "gte", '"eq", "ne", "ge", "gt", "le", "lt"'),
        ("SEM", "seq_cst", '"acquire", "release", "acq_rel", "relaxed"'),
        ("SCOPE", "device", '"gpu", "cta", "sys"'),
    ],
)
def test_an_option_outside_its_set_is_an_error_naming_the_call(k, option, bad, allowed):
    values = {"OP": "add", "CMP": "ge", "SEM": "release", "SCOPE": "sys"} | {option: bad}

    def body():
        flags = torch.zeros(1, dtype=torch.int32)
        try:
            k.options_from_parameters[(1,)](flags, address_table([flags]), 0, *values.values(), 1)
        except Exception as error:  # the interpreter raises Triton's compile-time error at the launch
            return str(error)
        return "no error"

    message = in_one_rank(body)
    lines = KERNELS.read_text().splitlines()
    line = next(n for n, text in enumerate(lines, 1) if "castpile.signal(pads[rank]" in text)
    site = f"{KERNELS}:{line + 1 if option == 'CMP' else line}"  # the first call to take the value
    assert site in message and bad in message and allowed in message, message


# how counting_with_eq's wait is written: a constexpr decrement= with cmp= or reset=, or a literal one with a cmp=
# that is no literal; D chooses between a wait that is correct (D False) and one that is not (D True)
COUNTING_WRITTEN = {
    "cmp": 'cmp="eq", decrement=D)',
    "reset": "reset=0, decrement=D)",
    "cmp from a conditional": 'cmp="eq" if D else "ge", decrement=True)',
}


@pytest.mark.parametrize("written", sorted(COUNTING_WRITTEN))
def test_a_counting_wait_with_another_cmp_or_a_reset_is_an_error_naming_the_call(tmp_path, written):
    call = COUNTING_WRITTEN[written]
    source = KERNELS.read_text().replace('cmp="eq", decrement=D)', call)
    path = tmp_path / "counting_with_eq.py"
    path.write_bytes(castpile.transpile(source.encode(), str(path)))
    module = import_file(path)
    line = next(n for n, text in enumerate(source.splitlines(), 1) if call in text)

    def body():
        flag = torch.ones(1, dtype=torch.int32)
        module.counting_with_eq[(1,)](flag, False)  # no decrement: cmp= and reset= are the wait's own
        assert flag.item() == 0
        try:
            module.counting_with_eq[(1,)](flag, True)
        except Exception as error:
            return str(error)
        return "no error"

    message = in_one_rank(body)
    assert f"{path}:{line}: error: castpile.wait(decrement=True) is a counting semaphore" in message, message


def test_the_helpers_check_the_option_values_the_contract_allows():
    from castpile.compiler.contract import FLAG_OPTIONS
    from castpile.compiler.helpers.common import _castpile_flag_options as check

    for call, options in FLAG_OPTIONS.items():
        kind = "cmp" if call == "wait" else "op"
        for keyword, values in options.items():
            for value in values:
                given = {kind: "eq" if call == "wait" else "set", "sem": "relaxed", "scope": "gpu"} | {keyword: value}
                assert check("k.py:1", call, given[kind], given["sem"], given["scope"])
            given = {kind: "eq" if call == "wait" else "set", "sem": "relaxed", "scope": "gpu"} | {keyword: "bogus"}
            with pytest.raises(ValueError) as refused:
                check("k.py:1", call, given[kind], given["sem"], given["scope"])
            spelled = ", ".join(f'"{v}"' for v in values)
            assert f"k.py:1: error: castpile.{call}: {keyword}= must be one of {spelled}, not 'bogus'" == str(
                refused.value
            )


# -- located errors ----------------------------------------------------------------------------------------

HEAD = "import triton\nimport triton.language as tl\nimport castpile\n\n@triton.jit\ndef k(flag, table, W: tl.constexpr):\n"


@pytest.mark.parametrize(
    ("body", "code", "column"),
    [
        ("    castpile.wait(flag, 2, cmp='eq', decrement=True)\n", "E417", 32),
        ("    castpile.wait(flag, 2, reset=0, decrement=True)\n", "E417", 34),
        (
            "    f = castpile.multicast_like(flag, table[:W], remote='nvshmem')\n    castpile.wait(f[0], 2, decrement=True)\n",
            "E418",
            38,
        ),
        (
            "    f = castpile.multicast_like(flag, table[:W], remote='nvshmem')\n    v = castpile.wait(f[0], 2)\n",
            "E418",
            9,
        ),
    ],
)
def test_located_errors_of_the_new_forms(body, code, column):
    [(line, col, found, _)] = diagnostics_of(HEAD + body)
    assert (found, line, col) == (code, 6 + body.count("\n"), column)


# -- every keyword in every spelling compiles for sm_90 ------------------------------------------------------

# spelling -> (how a value is written, extra module text, extra kernel lines); {v} is the value's literal text
SPELLINGS = {
    "literal": lambda key, v: v,
    "parameter": lambda key, v: v if key == "dtype" else f"K_{key}",  # a dtype is no JSON constexpr
    "conditional": lambda key, v: f"{v} if MODE == 1 else " + ("tl.float64" if key == "dtype" else f"K_{key}"),
    "global": lambda key, v: f"G_{key}",
    "attribute": lambda key, v: f"spelled_values.G_{key}",
    "local": lambda key, v: f"l_{key}",
}
# keyword -> its value in the kernel below (source text)
VALUES = {
    "cache_modifier": '".cg"',
    "eviction_policy": '"evict_last"',
    "volatile": "True",
    "store_cache": '".wb"',
    "sem": '"release"',
    "acquire": '"acquire"',
    "scope": '"sys"',
    "op": '"add"',
    "cmp": '"ge"',
    "dtype": "tl.float32",
    "keep_dims": "False",
}
KERNEL = '''
@triton.jit
def spelled(out, table, flags, pad_table, rank, W: tl.constexpr, BLOCK: tl.constexpr, MODE: tl.constexpr, {params}):
    """Every keyword of every castpile call, spelled one way."""
{locals}    offs = tl.arange(0, BLOCK)
    bufs = castpile.multicast_like(out, table[:W], shape=(BLOCK,))
    pads = castpile.multicast_like(flags, pad_table[:W], shape=(W,))
    x = tl.load(bufs[offs], cache_modifier={cache_modifier}) + tl.load(bufs[offs], eviction_policy={eviction_policy})
    x += tl.load(bufs[offs], volatile={volatile})
    tl.store(bufs[offs], x, cache_modifier={store_cache})
    tl.store(bufs[offs], x, eviction_policy={eviction_policy})
    tl.atomic_add(bufs[offs], x, sem={sem}, scope={scope})
    old = tl.atomic_cas(pads[rank], 0, 1, sem={sem}, scope={scope})
    s = tl.sum(bufs[offs], axis=0, dtype={dtype}, keep_dims={keep_dims})
    castpile.signal(pads[rank], op={op}, sem={sem}, scope={scope})
    castpile.signal(pads[rank], 1, wait_for=0, sem={sem}, scope={scope})
    castpile.wait(pads[rank], 1, cmp={cmp}, sem={acquire}, scope={scope})
    seen = castpile.wait(flags + rank, 1, cmp={cmp}, sem={acquire}, scope={scope}, reset=None)
    castpile.signal(flags + W, op={op}, sem={sem}, scope={scope})
    taken = castpile.wait(flags + W, 1, decrement=True, sem={acquire}, scope={scope})
    tl.store(out + offs, s + tl.sum(old, axis=0) + seen + taken)
'''


def spelled_source(spelling: str) -> str:
    """The kernel ``spelled`` with every keyword's value written as ``spelling``."""
    write = SPELLINGS[spelling]
    params = ", ".join(f"K_{key}: tl.constexpr" for key in VALUES if key != "dtype")
    module = "".join(f"G_{key} = tl.constexpr({v})\n" for key, v in VALUES.items())
    local = "".join(f"    l_{key}: tl.constexpr = {v}\n" for key, v in VALUES.items()) if spelling == "local" else ""
    body = KERNEL.format(params=params, locals=local, **{key: write(key, v) for key, v in VALUES.items()})
    return (
        "import sys\nimport os\nsys.path.insert(0, os.path.dirname(__file__))\n"
        "import triton\nimport triton.language as tl\n\nimport castpile\nimport spelled_values\n\n" + module + body
    )


def spelling_jobs(directory: Path) -> list[Job]:
    """Each spelling's kernel transpiled under both strategies and in debug mode, as compile jobs."""
    (directory / "spelled_values.py").write_text(
        "import triton.language as tl\n\n" + "".join(f"G_{key} = tl.constexpr({v})\n" for key, v in VALUES.items())
    )
    jobs = []
    for spelling in SPELLINGS:
        source = spelled_source(spelling)
        types = {"out": "*fp32", "table": "*i64", "flags": "*i32", "pad_table": "*i64"}
        sig = signature(source, "spelled", types)
        given = {f"K_{key}": ast.literal_eval(v) for key, v in VALUES.items() if key != "dtype"}
        constexprs = {"W": 2, "BLOCK": 16, "MODE": 1} | given
        for mode, options in [("loop", {}), ("gather", {}), ("debug", {"debug_waits": 5})]:
            strategy = "loop" if mode == "debug" else mode
            path = directory / f"spelled_{spelling}_{mode}.py"
            path.write_bytes(castpile.transpile(source.encode(), str(path), strategy=strategy, **options))
            jobs.append(Job(path, "spelled", sig, constexprs, name=f"{spelling} {mode}"))
    return jobs


def test_every_spelling_of_every_keyword_compiles_for_sm90(tmp_path):
    results = compile_for_sm90(spelling_jobs(tmp_path), tmp_path, processes=2)
    failures = {name: r.error for name, r in results.items() if not r.ok}
    assert not failures, "\n\n".join(f"{name}:\n{error}" for name, error in failures.items())


def test_no_compile_time_value_is_hoisted_into_a_local(tmp_path):
    for spelling in ("conditional", "attribute"):
        text = castpile.transpile(spelled_source(spelling), "k.py").decode()
        body = text[text.index("def spelled") : text.index("# ---- castpile")]
        assert "_castpile_v" not in body and "_castpile_p" not in body, body


# -- the file's kernels compile for sm_90 ------------------------------------------------------------------

COMPILES = {
    "take_counts": [{"FORM": 0}, {"FORM": 1}],
    "seen_stack": [{"W": w, "WP": padded(w), "BLOCK": 4, "RESET": reset} for w in (1, 3) for reset in (False, True)],
    "seen_one_peer": [{}],
    "local_flags": [
        {"BLOCK": 8, "OP": op, "CMP": cmp} for op, cmp in [("set", "eq"), ("add", "ge"), ("add", "eq"), ("set", "le")]
    ],
    "wait_maybe_counting": [{"D": True}, {"D": False}],
    "counting_with_eq": [{"D": False}],
    "raise_root": [{}],
    "seen_in_written_order": [{}],
    "take_from_root": [{}],  # with D, the error the test above expects
    "options_from_parameters": [
        {"OP": op, "CMP": cmp, "SEM": sem, "SCOPE": scope, "W": 2}
        for op, cmp, sem, scope in [("add", "ge", "release", "sys"), ("set", "eq", "relaxed", "gpu")]
    ],
}


CALLED_ONLY = {"_bump"}  # jit functions that return a value: no kernels, compiled through their callers


def test_every_kernel_of_the_file_has_compiles():
    tree = ast.parse(KERNELS.read_text())
    functions = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert sorted(COMPILES) == sorted(functions - CALLED_ONLY)


@pytest.mark.parametrize("mode", ["loop", "gather", "debug"])
def test_every_kernel_compiles_for_sm90(tmp_path, mode):
    module = tmp_path / f"kernels_v13_sync_{mode}.py"
    options = {"debug_waits": 5} if mode == "debug" else {}
    strategy = "loop" if mode == "debug" else mode
    module.write_bytes(castpile.transpile(KERNELS.read_bytes(), str(KERNELS), strategy=strategy, **options))
    source = KERNELS.read_text()
    types = {
        "flag": "*i32",
        "flags": "*i32",
        "seen": "*i32",
        "out": "*i32",
        "table": "*i64",
        "pad": "*i32",
        "pad_ptrs": "*i64",
        "counters": "*i32",
    }
    jobs = [
        Job(module, kernel, signature(source, kernel, types), constexprs, name=f"{kernel} {constexprs}")
        for kernel, variants in COMPILES.items()
        for constexprs in variants
    ]
    results = compile_for_sm90(jobs, tmp_path, processes=2)
    failures = {name: r.error for name, r in results.items() if not r.ok}
    assert not failures, "\n\n".join(f"{name}:\n{error}" for name, error in failures.items())
