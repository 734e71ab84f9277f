"""Notebooks across cells, executed for real (nbclient on an ipykernel): names, helpers and annotations of earlier
cells resolve as Python resolves them, a ``%%time`` cell's kernel is read, and a kernel's run-time error names the
cell and the user's line.  Before: E606 for a ``Multicast`` imported in an earlier cell, E202 for a helper of an
earlier cell, E701 in a ``%%time`` cell, and tracebacks naming the cache entry and the transpiled line."""

import re

from testkit.notebook import run_cells

IMPORTS = """\
import torch
import triton
import triton.language as tl
import castpile
from castpile import Multicast
"""

INPUTS = """\
a, b, out = torch.arange(16.0), torch.full((16,), 3.0), torch.zeros(16)
ptrs = torch.tensor([a.data_ptr(), b.data_ptr()], dtype=torch.int64)
"""

HELPER = """\
@castpile.jit
def total(bufs: Multicast, offs):
    return tl.sum(bufs[offs], axis=0)
"""

KERNEL = """\
@castpile.jit
def kern(out, dev_ptrs, n, W: tl.constexpr, BLOCK: tl.constexpr):
    bufs = castpile.multicast_like(out, dev_ptrs[:W], shape=(n,))
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, total(bufs, offs), mask=offs < n)
"""

LAUNCH = """\
out.zero_()
kern[(1,)](out, ptrs, 10, W=2, BLOCK=16)
assert torch.equal(out[:10], a[:10] + b[:10]) and not out[10:].any(), out
print("exact")
"""


def test_cells_share_names_helpers_and_annotations(tmp_path):
    same_cell = HELPER.replace("total", "peak").replace("tl.sum", "tl.max") + "\n\n" + KERNEL.replace("total", "peak")
    outputs = run_cells(
        [
            IMPORTS,
            INPUTS,
            HELPER,  # a helper in a cell of its own, `Multicast` imported by the first cell
            KERNEL,  # its caller in a later cell (the helper lowered for what this kernel passes it)
            LAUNCH,
            same_cell,  # a helper annotated with the earlier cell's `Multicast`, its caller beside it
            LAUNCH.replace("a[:10] + b[:10]", "torch.maximum(a[:10], b[:10])"),
            "%%time\n"
            + KERNEL.replace("total(bufs, offs)", "2 * total(bufs, offs)")
            + "\n"
            + LAUNCH.replace("a[:10] + b[:10]", "2 * (a[:10] + b[:10])"),
        ],
        tmp_path / "cache",
    )
    for k in (2, 3, 5):
        assert outputs[k] == "", (k, outputs[k])
    assert outputs[4] == outputs[6] == "exact\n", outputs
    assert "exact\n" in outputs[7] and "Error" not in outputs[7], outputs[7]


def test_a_triton_jit_helper_of_an_earlier_cell_says_what_to_do(tmp_path):
    helper = HELPER.replace("@castpile.jit", "@triton.jit")
    outputs = run_cells([IMPORTS, helper, KERNEL], tmp_path / "cache")
    assert "castpile:E704" in outputs[2], outputs[2]
    assert "kern calls total, which uses castpile, but @triton.jit does not transpile it" in outputs[2]
    assert "decorate total with @castpile.jit as well" in outputs[2]
    assert "def total(bufs: Multicast, offs):" in outputs[2]  # located at the helper's own cell


def test_a_kernels_error_names_the_cell_and_the_users_line(tmp_path):
    broken = KERNEL.replace("    tl.store(", "    broken = bufs[offs].no_such_method()\n    tl.store(")
    broken = broken.replace("total(bufs, offs)", "tl.sum(bufs[offs], axis=0)")  # a kernel on its own
    outputs = run_cells([IMPORTS, INPUTS, broken, LAUNCH, "1 / 0"], tmp_path / "cache")
    error = outputs[3]
    assert "AttributeError" in error and "no_such_method" in error, error
    assert "broken = bufs[offs].no_such_method()" in error, error  # the user's line, not the transpiled one
    assert "_castpile_" not in error and str(tmp_path / "cache") not in error, error
    cell = next(line for line in error.splitlines() if ", in kern" in line)
    assert "ipykernel_" in cell and "line 5" in cell, cell  # the kernel's cell, at the line in the cell
    assert "ZeroDivisionError" in outputs[4] and "Cell In[5]" in outputs[4]  # other errors: IPython's own display


SIM_IMPORTS = """\
import torch
import triton
import triton.language as tl
from castpile.gpu import sim


@triton.jit
def peer_sum(out, buf_ptrs, n, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.float32)
    for p in tl.static_range(WORLD):
        acc += tl.load(tl.load(buf_ptrs + p).to(tl.pointer_type(tl.float32)) + offs, mask=offs < n, other=0)
    tl.store(out + offs, acc, mask=offs < n)
"""

SIM_INPUTS = """\
W, n = 2, 40
inputs = [torch.randn(n) for _ in range(W)]
symm = sim.symmetric_empty(W, (n,), torch.float32)
for rank in range(W):
    symm[rank].tensor.copy_(inputs[rank])


def on_rank(rank):
    out = torch.empty(n)
    peer_sum[(2,)](out, symm[rank].buffer_ptrs, n, WORLD=W, BLOCK=32)
    return out
"""

SIM_RUN = """\
outs = sim.run(on_rank, W, timeout=60)
assert all(torch.allclose(out, inputs[0] + inputs[1]) for out in outs), outs
print("exact")
"""


def test_sim_run_warns_of_ipykernels_threads_once_with_advice_a_notebook_can_follow(tmp_path):
    """Three sim.run calls on three lines of two cells: one ForkWithThreadsWarning in the whole notebook, whose
    advice is the notebook's (restart the kernel, set the variable in its first cell), and each cell's prints once.
    Before: the warning three times on the first call at W 2 (each forked rank flushed its copy of the parent's
    unwritten stderr as it ended) and a print before sim.run once more per rank; earlier still, warned again from
    each calling line, with advice (start no threads before sim.run) that ipykernel's own threads make impossible
    to follow."""
    outputs = run_cells(
        [SIM_IMPORTS, SIM_INPUTS, SIM_RUN + "\n" + SIM_RUN, SIM_RUN],  # two calls in one cell, one in the next
        tmp_path / "cache",
    )
    everything = "".join(outputs)
    assert everything.count("ForkWithThreadsWarning") == 1, everything  # ipykernel always has threads: not 0
    warning = outputs[2]
    assert "ForkWithThreadsWarning: the parent process had threads [" in warning, warning
    assert "'Heartbeat'" in warning, warning  # ipykernel's threads, named
    assert re.search(r"in a notebook, ipykernel's own threads .* first cell", warning), warning
    assert "os.environ['TORCHINDUCTOR_COMPILE_THREADS'] = '1'" in warning, warning
    assert outputs[:2] == ["", ""], outputs[:2]
    assert outputs[2].count("exact\n") == 2 and outputs[3] == "exact\n", outputs[2:]
