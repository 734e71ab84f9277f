"""castpile.gpu.launch: the launcher's arguments, checked against the installed Triton's own launch code; the interpreter path.

CI has no GPU, so the compiled path runs here on a stand-in for Triton's
``CompiledKernel``: its launcher is a real ``CudaLauncher`` (Triton's own Python
``__call__``, which turns Triton's launch convention into the C ``launch`` call)
whose C ``launch`` only records what it is given.  Triton 3.5 and 3.6 compile a C
``launch`` for each kernel, which takes the kernel's arguments one by one; Triton 3.9
has one C ``launch`` for every kernel, which takes them as one sequence after their
annotations and the kernel's signature, both held by the launcher.
"""

import contextvars
import inspect
from types import SimpleNamespace

import pytest
import torch
import triton
import triton.language as tl
from triton import knobs
from triton.backends.nvidia import driver as nvidia_driver
from triton.backends.nvidia.driver import CudaLauncher
from triton.runtime import _allocation

from castpile.gpu.launch import STREAM_SLOT, LateTensor, bind, bound_values, late_tensors, launcher_call

FUNCTION = 0xF00D  # the CUfunction handle
PACKED = ("packed", "metadata")
STREAM = 0x5EA


def _signature_only(x, BLOCK: tl.constexpr, y, n, SCALE: tl.constexpr = 2, eps=0.5):
    """A kernel's parameters: a constexpr between tensors, defaults at the end (never run)."""


SIGNATURE = inspect.signature(_signature_only)
#: Whether the installed Triton's launcher is one C ``launch`` for every kernel (Triton 3.9), which reads the
#: kernel's argument annotations and signature from the launcher.
ONE_LAUNCH_FOR_ALL = hasattr(nvidia_driver, "make_kernel_signature")
ANNOTATIONS, KERNEL_SIGNATURE = ("annotations",), b"signature"


class _RecordingLaunch:
    """Triton's C ``launch`` stand-in: records each call's arguments, tensors as the addresses the C code reads."""

    def __init__(self):
        self.calls = []

    def __call__(self, *args):
        self.calls.append(_plain(args))


def _plain(value):
    """``value`` with tensors as their addresses, and sequences (the kernel's arguments, for Triton 3.9) as tuples."""
    if isinstance(value, torch.Tensor):
        return value.data_ptr()
    if isinstance(value, list | tuple):
        return tuple(_plain(v) for v in value)
    return value


def _compiled(global_scratch=0, profile_scratch=0, one_launch_for_all=ONE_LAUNCH_FOR_ALL, gsan=False):
    """A stand-in for Triton's ``CompiledKernel`` with loaded handles, its launcher a real ``CudaLauncher``
    holding what the installed Triton's ``CudaLauncher.__init__`` gives it (``one_launch_for_all``: Triton 3.9's)."""
    launcher = object.__new__(CudaLauncher)  # no __init__: that builds the C launcher, or needs a GPU driver
    launcher.launch = _RecordingLaunch()
    launcher.num_ctas = 1
    launcher.global_scratch_size, launcher.global_scratch_align = global_scratch, 128
    launcher.profile_scratch_size, launcher.profile_scratch_align = profile_scratch, 64
    launcher.launch_cooperative_grid, launcher.launch_pdl = False, True
    if one_launch_for_all:
        launcher.arg_annotations, launcher.kernel_signature, launcher.gsan_enabled = ANNOTATIONS, KERNEL_SIGNATURE, gsan
    return SimpleNamespace(function=FUNCTION, packed_metadata=PACKED, run=launcher, _init_handles=lambda: None)


def _scratch(size, align, stream):
    """A deterministic allocation: the same request gives the same (recorded) buffer."""
    return ("scratch", size, align, stream)


def _through_triton(compiled, grid, values):
    """What Triton's ``JITFunction.run`` does to launch: ``compiled.run(grid, stream, function, packed metadata,
    launch metadata, hooks, *bound arguments)`` (no launch hooks: ``None`` metadata and hooks)."""
    compiled.run(*grid, STREAM, compiled.function, compiled.packed_metadata, None, None, None, *values)
    return compiled.run.launch.calls.pop()


def _with_allocators(fn):
    """``fn()`` with scratch allocators set, in a copied context (Triton's allocator is a context variable)."""

    def with_global_allocator():
        triton.set_allocator(_scratch)
        return fn()

    profile = _allocation._profile_allocator.get()
    _allocation._profile_allocator.set(_scratch)
    try:
        return contextvars.copy_context().run(with_global_allocator)
    finally:
        _allocation._profile_allocator.set(profile)


@pytest.mark.parametrize("one_launch_for_all", [False, True], ids=["a launch per kernel", "one launch for all"])
def test_arguments_are_grid_stream_head_then_every_parameter_in_declaration_order(one_launch_for_all):
    x, y = torch.zeros(4), torch.zeros(8)
    compiled = _compiled(one_launch_for_all=one_launch_for_all)
    call = launcher_call(compiled, (5,), SIGNATURE, (x,), dict(n=10, y=y, BLOCK=64, num_warps=8), late=("y", "x"))
    grid_and_stream = (5, 1, 1, None)
    # BLOCK and SCALE in their places, defaults applied, no num_warps
    parameters = (x.data_ptr(), 64, y.data_ptr(), 10, 2, 0.5)
    if one_launch_for_all:  # cooperative, pdl, metadata, launch metadata, 2 hooks, 2 scratch, annotations, signature
        head = (FUNCTION, False, True, PACKED, None, None, None, None, None, ANNOTATIONS, KERNEL_SIGNATURE)
    else:  # cooperative, pdl, 2 scratch, metadata, launch metadata, 2 hooks
        head = (FUNCTION, False, True, None, None, PACKED, None, None, None)
    assert call.arguments == grid_and_stream + head + parameters
    first = len(grid_and_stream + head)
    assert call.late == {"x": first, "y": first + 2}
    assert call.packed_from == (first if one_launch_for_all else None)
    assert call.entry is compiled.run.launch


def test_a_gsan_launcher_is_called_itself():
    """Triton 3.9's launcher with its global sanitizer on adds the sanitizer's arguments: castpile goes through it."""
    compiled = _compiled(one_launch_for_all=True, gsan=True)
    call = launcher_call(compiled, (2,), SIGNATURE, (torch.zeros(4), 8, torch.zeros(8), 1), {})
    assert call.entry is compiled.run and call.packed_from is None
    assert call.arguments[STREAM_SLOT + 1 :][:5] == (FUNCTION, PACKED, None, None, None)


@pytest.mark.parametrize("global_scratch,profile_scratch", [(0, 0), (256, 0), (0, 32)])
def test_a_bound_launch_makes_the_c_call_triton_makes(global_scratch, profile_scratch, monkeypatch):
    """No scratch: the bare ``launch`` is called directly; with scratch: through the launcher, which allocates."""
    monkeypatch.setattr(triton.runtime.driver, "_active", SimpleNamespace())  # Triton 3.9's launcher reads it
    compiled = _compiled(global_scratch, profile_scratch)
    x, y = torch.zeros(4), torch.zeros(8)
    call = launcher_call(compiled, (3, 2), SIGNATURE, (x, 16, y, 7), dict(SCALE=5))
    arguments = list(call.arguments)
    arguments[STREAM_SLOT] = STREAM

    def both():
        call.issue(arguments)
        return compiled.run.launch.calls.pop(), _through_triton(compiled, (3, 2, 1), [x, 16, y, 7, 5, 0.5])

    ours, triton_s_own = _with_allocators(both)
    assert ours == triton_s_own
    assert (call.entry is compiled.run) == bool(global_scratch or profile_scratch)


def test_bind_launches_through_the_compiled_path_with_late_tensors_and_the_current_stream(monkeypatch):
    compiled = _compiled()
    warmed = []

    class FakeJITFunction:
        fn = staticmethod(_signature_only)

        def warmup(self, *args, grid, **kwargs):
            warmed.append((args, grid, kwargs))
            return compiled

    monkeypatch.setenv("TRITON_INTERPRET", "0")  # the knob reads it; setattr on the knob would leave it pinned
    monkeypatch.setattr(
        triton.runtime.driver,
        "_active",
        SimpleNamespace(get_current_stream=lambda device: STREAM, get_current_device=lambda: 0),
    )
    x, y, z = torch.zeros(4), torch.zeros(8), torch.zeros(8)
    launch = bind(FakeJITFunction(), (5,), x, 64, y, n=10, num_warps=4, late=("y",))
    assert warmed == [((x, 64, y), (5, 1, 1), dict(n=10, num_warps=4))]
    launch(y=z)
    launch(y=y)
    launch(y=z)
    launch()  # no late tensor: the bound one, not the last call's (which may be freed by now)
    first, second, _, fourth = compiled.run.launch.calls
    assert first == _through_triton(compiled, (5, 1, 1), [x, 64, z, 10, 2, 0.5])
    assert second == fourth == _through_triton(compiled, (5, 1, 1), [x, 64, y, 10, 2, 0.5])
    assert launch.kernel is compiled
    assert launch.keep_alive[0] is x and not any(v is y for v in launch.keep_alive)  # a late tensor is not kept


def test_argument_errors():
    x, y = torch.zeros(4), torch.zeros(8)
    with pytest.raises(TypeError, match=r"late \['z'\] are not parameters"):
        launcher_call(_compiled(), (1,), SIGNATURE, (x, 8, y, 1), {}, late=("z",))
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        launcher_call(_compiled(), (1,), SIGNATURE, (x, 8, y, 1), dict(bogus=1))
    with pytest.raises(TypeError, match="missing a required argument: 'n'"):
        launcher_call(_compiled(), (1,), SIGNATURE, (x, 8, y), {})
    with pytest.raises(TypeError, match="late parameter 'n' must be given a tensor"):
        late_tensors(dict(x=x, n=3), ("n",))
    with pytest.raises(TypeError, match="late parameter 'out' must be given a tensor, got None"):
        late_tensors(dict(x=x), ("out",))
    assert late_tensors(dict(x=x, y=torch.zeros(9)[1:]), ("x", "y")) == {
        "x": LateTensor(torch.float32, True),
        "y": LateTensor(torch.float32, False),
    }


@triton.jit
def _axpy(x, y, n, a, BLOCK: tl.constexpr, SCALE: tl.constexpr = 2):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n) * a * SCALE, mask=offs < n)


def test_bound_values_apply_defaults_and_drop_launch_options():
    assert bound_values(inspect.signature(_axpy.fn), (1, 2, 3), dict(a=4, BLOCK=8, num_warps=4)) == [1, 2, 3, 4, 8, 2]


def test_bind_launches_like_a_grid_call():
    x = torch.arange(100, dtype=torch.float32)
    y = torch.zeros(100)
    launch = bind(_axpy, (4,), x, y, 100, 3.0, BLOCK=32)
    launch()
    assert torch.equal(y, x * 6)


def test_late_tensor_replaces_the_bound_one_per_call():
    x = torch.arange(64, dtype=torch.float32)
    first, second = torch.zeros(64), torch.zeros(64)
    launch = bind(_axpy, (2,), x, first, 64, 1.0, BLOCK=32, late=("y",))
    launch(y=second)
    assert torch.equal(second, x * 2) and not first.any()
    launch()
    assert torch.equal(first, x * 2)


def test_late_tensor_must_match_what_was_compiled_for():
    x = torch.arange(64, dtype=torch.float32)
    launch = bind(_axpy, (2,), x, torch.zeros(64), 64, 1.0, BLOCK=32, late=("y",))
    with pytest.raises(ValueError, match="float32"):
        launch(y=torch.zeros(64, dtype=torch.float64))
    with pytest.raises(ValueError, match="aligned"):
        launch(y=torch.zeros(65)[1:])
    with pytest.raises(TypeError, match="'x' is not a late parameter"):
        launch(x=x)
    with pytest.raises(ValueError, match="graph"):
        bind(_axpy, (2,), x, torch.zeros(64), 64, 1.0, BLOCK=32, late=("y",), graph=True)


def test_an_empty_hook_chain_is_no_hook(monkeypatch):
    from castpile.gpu.launch import launch_hooked

    chain = type(knobs.runtime.launch_enter_hook)()
    monkeypatch.setattr(knobs.runtime, "launch_enter_hook", chain)
    monkeypatch.setattr(knobs.runtime, "launch_exit_hook", type(chain)(reversed=True))
    assert not launch_hooked()
    chain.add(print)
    assert launch_hooked()
