"""Launching a Triton kernel with its grid and arguments bound once.

``kernel[grid](*args)`` re-binds the arguments, recomputes the specialisation
key and looks the compiled kernel up on every call: on an H200 host that costs
more than a small kernel runs.  :func:`bind` does that work once and returns a
callable that issues only the driver launch (one C call with a prebuilt
argument tuple, on the current stream, so it also works under CUDA-graph
capture and inside ``torch.cuda.stream(...)``)::

    launch = bind(kernel, (grid,), buf, ptrs, out, n, W=4, BLOCK=1024)
    launch()          # same effect as kernel[(grid,)](buf, ptrs, out, n, W=4, BLOCK=1024)

The arguments are frozen: tensors by address (they must stay alive; the
returned callable keeps references to them) and scalars by value.  Bind again
when any of them changes.  Under ``TRITON_INTERPRET=1``, or while a Triton
launch hook is installed (a profiler's), the callable falls back to ``kernel[grid](...)``.

A bound launch costs a fraction of the host time of ``kernel[grid]``
(docs/data/probe-launch-bw.json): Triton 3.6 computes launch metadata for its
(empty) hook chain on every grid call.  Calling the driver through ctypes
instead of Triton's C launcher was slower (the same file).

``graph=True`` goes further: the one launch is captured once into a CUDA graph
and each call replays it on the current stream (less host time still, the same file);
while the current stream is itself being captured, the call launches directly.

What a bound launch passes to the launcher is worked out by one pure function,
:func:`launcher_call`, from the kernel's signature, the compiled kernel and the
arguments: tests check it on CPU against a stand-in for Triton's compiled kernel.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass

import triton
from triton import knobs

from .launch_gate import is_gate

#: Keyword arguments that configure the launch rather than bind a kernel parameter.
LAUNCH_OPTIONS = (
    "num_warps",
    "num_stages",
    "num_ctas",
    "maxnreg",
    "enable_fp_fusion",
    "launch_cooperative_grid",
    "launch_pdl",
)
#: Index of the stream in the launcher's arguments: each launch puts the current stream there.
STREAM_SLOT = 3


def bind(kernel, grid, *args, graph=False, late=(), **kwargs):
    """A callable that launches ``kernel[grid](*args, **kwargs)``; compiles now if needed.

    ``late`` names tensor parameters whose tensor each call may replace:
    ``launch(out=t)`` launches with ``t`` in place of the bound ``out`` (same
    dtype, and 16-byte aligned if the bound one was: the compiled kernel assumed
    so).  Late tensors are not kept alive by the callable.
    """
    if late and graph:
        raise ValueError("bind: a graph-replayed launch cannot take late tensors")
    grid = full_grid(grid)
    signature = inspect.signature(getattr(kernel, "fn", kernel))
    given = dict(zip(signature.parameters, args), **kwargs)
    expected = late_tensors(given, late)
    if _interpreted(kernel) or launch_hooked():
        return _grid_launch(kernel, grid, list(signature.parameters)[: len(args)], kwargs, given, expected)
    compiled = kernel.warmup(*args, grid=grid, **kwargs)
    compiled._init_handles()
    call = launcher_call(compiled, grid, signature, args, kwargs, late)
    issue, bound, positions = call.issue, tuple(call.arguments), call.late
    stream = functools.partial(triton.runtime.driver.active.get_current_stream, _device_index(args, kwargs))

    def launch(**tensors):
        arguments = list(bound)  # a late tensor lasts one call: the next goes back to the bound one
        for name, t in tensors.items():
            arguments[positions[name]] = _late_address(name, t, expected)
        arguments[STREAM_SLOT] = stream()
        issue(arguments)

    launch.kernel = compiled
    launch.keep_alive = tuple(v for k, v in given.items() if k not in expected)
    return _replayed(launch) if graph else launch


@dataclass(frozen=True)
class LateTensor:
    """What a tensor must be to stand in for a late parameter: the bound tensor's dtype and 16-byte alignment."""

    dtype: object
    aligned: bool


@dataclass(frozen=True)
class LauncherCall:
    """How a bound launch calls Triton's C launcher, worked out once (see :func:`launcher_call`).

    :meth:`issue` launches with ``arguments``, once the current stream is at :data:`STREAM_SLOT`.
    ``late`` maps each late parameter to the index of its address in ``arguments``.  ``packed_from``:
    where the kernel's parameters start when ``entry`` takes them as one sequence, its last argument
    (Triton 3.9's one C launch for every kernel); ``None`` when they follow one by one.
    """

    entry: Callable[..., object]
    arguments: tuple
    late: dict[str, int]
    packed_from: int | None = None

    def issue(self, arguments) -> None:
        """Launch with ``arguments``: :attr:`arguments` with the stream in its slot and late addresses in theirs."""
        if self.packed_from is None:
            self.entry(*arguments)
        else:
            self.entry(*arguments[: self.packed_from], arguments[self.packed_from :])


def launcher_call(compiled, grid, signature: inspect.Signature, args, kwargs, late=()) -> LauncherCall:
    """What a bound launch passes to Triton's launcher for ``kernel[grid](*args, **kwargs)``; reads, never calls.

    ``compiled`` is Triton's ``CompiledKernel`` with its handles loaded; only its
    ``function``, ``packed_metadata`` and ``run`` (the launcher: ``launch``, the
    scratch sizes, ``launch_cooperative_grid``, ``launch_pdl``; in Triton 3.9 also
    ``arg_annotations``, ``kernel_signature`` and ``gsan_enabled``) are read.  A kernel
    that needs scratch memory, or one built with Triton 3.9's global sanitizer (which
    adds arguments of its own), goes through the launcher itself, which allocates the
    scratch on each call; any other calls the bare ``launch``, as the launcher would.
    The arguments are the grid, the stream slot, that head, then every parameter in
    declaration order, constexprs and defaults included (tensors as addresses), as
    Triton's own launch passes them.  Triton 3.5 and 3.6 compile a ``launch`` for each
    kernel, which takes the scratch buffers before the metadata and the parameters one
    by one; Triton 3.9's one ``launch`` for every kernel takes the metadata first, the
    scratch buffers, the parameters' annotations and the kernel's signature, then the
    parameters as one sequence.
    """
    launcher = compiled.run
    packed = hasattr(launcher, "kernel_signature")
    if (
        getattr(launcher, "global_scratch_size", 0)
        or getattr(launcher, "profile_scratch_size", 0)
        or getattr(launcher, "gsan_enabled", False)
    ):
        entry, head, packed = launcher, [compiled.function, compiled.packed_metadata, None, None, None], False
    elif packed:
        entry, head = (
            launcher.launch,
            [
                compiled.function,
                launcher.launch_cooperative_grid,
                launcher.launch_pdl,
                compiled.packed_metadata,
                None,
                None,
                None,
                None,
                None,
                launcher.arg_annotations,
                launcher.kernel_signature,
            ],
        )
    else:
        entry, head = (
            launcher.launch,
            [
                compiled.function,
                launcher.launch_cooperative_grid,
                launcher.launch_pdl,
                None,
                None,
                compiled.packed_metadata,
                None,
                None,
                None,
            ],
        )
    values = [_address(v) for v in bound_values(signature, args, kwargs)]
    arguments = (*full_grid(grid), None, *head, *values)
    names = list(signature.parameters)
    unknown = [name for name in late if name not in names]
    if unknown:
        raise TypeError(f"bind: late {unknown} are not parameters of the kernel ({', '.join(names)})")
    first = len(arguments) - len(values)
    return LauncherCall(entry, arguments, {name: first + names.index(name) for name in late}, first if packed else None)


def bound_values(signature: inspect.Signature, args, kwargs) -> list:
    """The kernel's parameters in declaration order, defaults applied (what Triton's launcher takes)."""
    params = {k: v for k, v in kwargs.items() if k not in LAUNCH_OPTIONS}
    bound = signature.bind(*args, **params)
    bound.apply_defaults()
    return list(bound.arguments.values())


def late_tensors(given: dict, late) -> dict[str, LateTensor]:
    """What each late parameter's stand-in must be, from the tensors ``given`` (parameter name -> argument)."""
    expected = {}
    for name in late:
        tensor = given.get(name)
        if tensor is None or not hasattr(tensor, "data_ptr"):
            raise TypeError(f"bind: late parameter {name!r} must be given a tensor, got {tensor!r}")
        expected[name] = LateTensor(tensor.dtype, tensor.data_ptr() % 16 == 0)
    return expected


def full_grid(grid) -> tuple:
    """``grid`` with its missing dims as 1: three ints."""
    return tuple(grid) + (1,) * (3 - len(grid))


def _grid_launch(kernel, grid, positional, kwargs, given, expected):
    """The bound launch through ``kernel[grid](...)`` (interpreter, launch hooks), late tensors replaced per call."""

    def launch(**tensors):
        call = dict(given)
        for name, t in tensors.items():
            _late_address(name, t, expected)
            call[name] = t
        kernel[grid](*[call[n] for n in positional], **{k: call[k] for k in kwargs})

    launch.kernel = None
    return launch


def _late_address(name, tensor, expected: dict[str, LateTensor]) -> int:
    """``tensor``'s address, after checking it may stand in for late parameter ``name``."""
    if name not in expected:
        raise TypeError(f"{name!r} is not a late parameter of this launch (late: {sorted(expected)})")
    want = expected[name]
    address = tensor.data_ptr()
    if tensor.dtype != want.dtype or (want.aligned and address % 16):
        raise ValueError(
            f"{name}: expected a {want.dtype} tensor{' 16-byte aligned' if want.aligned else ''}, "
            f"got {tensor.dtype} at {address:#x}"
        )
    return address


def _replayed(launch):
    """``launch`` captured once into a CUDA graph; calls replay it (or launch directly while capturing)."""
    import torch

    g = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream), torch.cuda.graph(g, stream=stream):
        launch()
    capturing, replay = torch.cuda.is_current_stream_capturing, g.replay

    def replay_or_launch():
        if capturing():
            launch()
        else:
            replay()

    replay_or_launch.kernel = launch.kernel
    replay_or_launch.keep_alive = (launch, g)
    return replay_or_launch


def launch_hooked() -> bool:
    """True while a Triton launch hook is installed (bound launches then go through ``kernel[grid]``).

    Triton 3.6 and later keep the hooks in a ``HookChain`` that is never None; it counts
    as installed only when it holds a hook.  One-GPU runs' launch gate
    (:mod:`castpile.gpu.launch_gate`) does not count: bound launches are bound at a barrier of their own.
    """
    hooks = (knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook)
    return any(not is_gate(h) for hook in hooks if hook is not None for h in getattr(hook, "calls", [hook]))


def _address(value):
    """A tensor's device address (an int the launcher takes without a Python call), other values as they are."""
    return value.data_ptr() if hasattr(value, "data_ptr") else value


def _interpreted(kernel) -> bool:
    return type(kernel).__name__ == "InterpretedFunction" or knobs.runtime.interpret


def _device_index(args, kwargs) -> int:
    for value in (*args, *kwargs.values()):
        device = getattr(value, "device", None)
        if device is not None and device.type == "cuda":
            return device.index if device.index is not None else triton.runtime.driver.active.get_current_device()
    return triton.runtime.driver.active.get_current_device()
