"""Language v1.1: each defect found by outside testing in names and refusals: generated names, scopes, import
fallbacks and aliases; targets, del, Ellipsis, slices and indices that are located errors. Kernels run in the
interpreter against torch references (W host tensors stand in for W GPUs) or compile for sm_90."""

import pytest
import torch

import castpile
from compile_sm90 import Job, compile_for_sm90
from testkit import address_table, import_file, padded
from testkit.diagnostics import diagnostics_of
from testkit.v11 import HEADER, KERNELS, ramps, v11_kernels  # noqa: F401 (the fixture k)


# 3. Generated names never collide with the user's.
@pytest.mark.parametrize("w", [2, 3])
def test_user_names_like_castpiles_own(k, w):
    n, b = 16, 8
    bufs = ramps(w, n)
    out = torch.full((padded(w) * b,), -1.0)
    k.lookalike_names[(1,)](out, address_table(bufs), n, w, b)
    a = torch.arange(b)
    for j, buf in enumerate(bufs):
        assert torch.equal(out.view(padded(w), b)[j], buf[a // 2 + 2])
    small = torch.zeros(padded(w))
    k.helper_lookalike[(1,)](small, address_table(bufs), w)
    assert torch.equal(small[:w], torch.stack([buf[0] + 1 for buf in bufs]))


def test_helper_names_move_aside_for_the_users():
    out = castpile.transpile(KERNELS.read_bytes(), str(KERNELS)).decode()
    assert out.count("def _castpile_load_loop(") == 1  # the user's; castpile's helpers use another prefix
    assert "def _castpile2_load_loop(" in out


# 4. Scopes: enclosing functions count.
@pytest.mark.parametrize("w", [2, 3])
def test_kernel_from_a_factory_importing_castpile(k, w):
    bufs = ramps(w, 4)
    out = torch.full((padded(w),), -1.0)
    k.make_kernel()[(1,)](out, address_table(bufs), w)
    assert torch.equal(out[:w], torch.stack([b[1] for b in bufs]))


def test_enclosing_parameter_shadows_castpile():
    source = (
        HEADER
        + """
def make(multicast_like):
    @triton.jit
    def k(out, table, W: tl.constexpr):
        bufs = multicast_like(out, table[:W])
        x = bufs[0]
    return k
"""
    ).encode()
    assert castpile.transpile(source, "k.py") == source


def test_uses_in_nested_functions_are_located_errors():
    source = (
        HEADER
        + """
@triton.jit
def k(out, table, W: tl.constexpr):
    bufs = multicast_like(out, table[:W])

    def inner(i):
        return bufs[i]

    f = lambda i: bufs[i] + 1
"""
    )
    assert diagnostics_of(source) == [(10, 16, "E207", {"name": "bufs"}), (12, 19, "E207", {"name": "bufs"})]


# 5. Targets castpile cannot lower, and f-strings, are located errors.
def test_unlowerable_targets_and_fstrings_are_located_errors():
    source = (
        HEADER
        + """
@triton.jit
def k(out, table, W: tl.constexpr):
    bufs = multicast_like(out, table[:W])
    bufs[0], x = 1, 2
    for bufs[1] in range(3):
        pass
    with open("f") as bufs[2]:
        pass
    s = f"{tl.sum(bufs[0], axis=0)}"
"""
    )
    assert diagnostics_of(source) == [
        (8, 5, "E211", {"where": "a tuple assignment", "name": "bufs"}),
        (9, 9, "E211", {"where": "a for loop", "name": "bufs"}),
        (11, 23, "E211", {"where": "a with statement", "name": "bufs"}),
        (13, 19, "E206", {"name": "bufs"}),
    ]


# 6. del
def test_del_of_a_multicast_tensor_is_an_error():
    source = (
        HEADER
        + """
@triton.jit
def k(out, table, W: tl.constexpr):
    bufs = multicast_like(out, table[:W])
    del bufs
"""
    )
    assert diagnostics_of(source) == [(8, 9, "E204", {})]


def test_ellipsis_needs_constexpr_power_of_two_extents():
    source = (
        HEADER
        + """
@triton.jit
def k(out, table, n, W: tl.constexpr):
    a = multicast_like(out, table[:W], shape=(n, 4))
    b = multicast_like(out, table[:W], shape=(2, 3))
    c = multicast_like(out, table[:W])
    x = a[...]
    y = b[0, ...]
    z = c[...]
    v = a[..., 0]
"""
    )
    assert diagnostics_of(source) == [
        (10, 11, "E308", {"extent": "n"}),
        (11, 14, "E308", {"extent": "3"}),
        (12, 11, "E306", {"name": "c"}),
        (13, 11, "E305", {"name": "a"}),
    ]


# 11. try/except import fallbacks
def test_try_except_import_fallback_is_castpiles():
    source = """\
import triton
import triton.language as tl
try:
    from castpile import multicast_like
except ImportError:
    multicast_like = None


@triton.jit
def k(out, table, W: tl.constexpr):
    bufs = multicast_like(out, table[:W])
    x = bufs[0]
"""
    out = castpile.transpile(source.encode(), "k.py").decode()
    assert "    bufs = table\n    x = _castpile_load_loop(bufs, W, None, out, 0, None)\n" in out


# 16. castpile's own work on a long index is linear (tests/test_scaling.py counts calls; benchmarks/bench_cpu.py --case long_index times it, libcst's parser included).
def test_an_index_of_2000_terms_transpiles():
    terms = " + ".join(f"a{i}" for i in range(2000))
    source = (
        HEADER
        + f"""
@triton.jit
def k(out, table, W: tl.constexpr):
    bufs = multicast_like(out, table[:W])
    x = bufs[{terms}]
"""
    )
    out = castpile.transpile(source.encode(), "k.py").decode()
    line = out.splitlines()[7]
    assert line.startswith("    x = _castpile_load_loop(bufs, W, None, out, ") and line.count(" + ") == 1999


def test_misused_slices_and_indices_are_located_errors():
    source = (
        HEADER
        + """
@triton.jit
def k(out, table, n, W: tl.constexpr):
    tile = table[1:W]
    tile = table[0:W]
    a = multicast_like(out, tile)
    b = multicast_like(out, table[W:W - 1])
    c = multicast_like(out, table[:W], shape=(n,))
    x = c[None]
    y = c["a"]
    z = c[1.5]
"""
    )
    assert diagnostics_of(source) == [
        (9, 29, "E107", {"name": "tile", "what": "slice", "spelled": "table[lo:hi]"}),
        (10, 29, "E111", {"count": 0}),
        (12, 11, "E303", {"code": "None", "name": "c"}),
        (13, 11, "E303", {"code": '"a"', "name": "c"}),
        (14, 11, "E303", {"code": "1.5", "name": "c"}),
    ]


ALIASED = """\
import triton
import castpile
tl = triton.language
language = triton.language
cp = castpile
mcl = cp.multicast_like
top = language.max


@triton.jit
def aliased_max(out, table, n, W: tl.constexpr, B: tl.constexpr):
    \"\"\"The stack max and min through assigned aliases of triton.language and castpile.multicast_like.\"\"\"
    bufs = mcl(out, table[:W], shape=(n,))
    a = tl.arange(0, B)
    tl.store(out + a, tl.max(bufs[a], axis=0))
    tl.store(out + B + a, top(bufs[a], axis=0))
    tl.store(out + 2 * B + a, language.min(tl.load(bufs[a], mask=a < n, other=-50.0), axis=0))
"""


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
def test_a_stack_max_through_assigned_aliases_ignores_padding(strategy, tmp_path):
    """`tl = triton.language` is triton.language: the max of 3 negative buffers is negative (not a padded 0)."""
    path = tmp_path / f"aliased_{strategy}.py"
    path.write_bytes(castpile.transpile(ALIASED.encode(), str(path), strategy=strategy))
    module = import_file(path)
    n, b = 6, 8
    bufs = [-(torch.arange(n, dtype=torch.float32) + 1 + 100 * j) for j in range(3)]  # all negative
    out = torch.zeros(3 * b)
    module.aliased_max[(1,)](out, address_table(bufs), n, 3, b)
    stacked = torch.stack(bufs)
    inside = torch.arange(b) < n
    expected_max = torch.where(inside, torch.cat([stacked.max(0).values, torch.zeros(b - n)]), 0.0)
    expected_min = torch.where(inside, torch.cat([stacked.min(0).values, torch.zeros(b - n)]), 0.0)
    assert torch.equal(out[:b], expected_max) and torch.equal(out[b : 2 * b], expected_max)
    assert torch.equal(out[2 * b :], expected_min)
    [result] = compile_for_sm90(
        [
            Job(
                path,
                "aliased_max",
                {"out": "*fp32", "table": "*i64", "n": "i32", "W": "constexpr", "B": "constexpr"},
                {"W": 3, "B": b},
            )
        ],
        tmp_path,
    ).values()
    assert result.ok, result.error
