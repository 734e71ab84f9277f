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

On the 2 x H200 host a bound launch costs 6.5 us of host time against 17.3 us
for ``kernel[grid]`` (docs/probe-launch-bw.json): Triton 3.6 computes launch
metadata for its (empty) hook chain on every grid call.  Calling the driver
through ctypes instead of Triton's C launcher was measured slower (7.4-7.7 us).

``graph=True`` goes further: the one launch is captured once into a CUDA graph
and each call replays it on the current stream (4.2 us of host time there);
while the current stream is itself being captured, the call launches directly.
"""

from __future__ import annotations

import functools
import inspect

import triton
from triton import knobs

#: Keyword arguments that configure the launch rather than bind a kernel parameter.
LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion", "launch_cooperative_grid",
                  "launch_pdl")


def bind(kernel, grid, *args, graph=False, late=(), **kwargs):
    """A callable that launches ``kernel[grid](*args, **kwargs)``; compiles now if needed.

    ``late`` names tensor parameters whose tensor each call may replace:
    ``launch(out=t)`` launches with ``t`` in place of the bound ``out`` (same
    dtype, and 16-byte aligned if the bound one was: the compiled kernel assumed
    so).  Late tensors are not kept alive by the callable.
    """
    grid = tuple(grid) + (1,) * (3 - len(grid))
    names = list(inspect.signature(getattr(kernel, "fn", kernel)).parameters)
    given = dict(zip(names, args), **kwargs)
    expected = {name: (given[name].dtype, given[name].data_ptr() % 16 == 0) for name in late}
    if late and graph:
        raise ValueError("bind: a graph-replayed launch cannot take late tensors")

    if _interpreted(kernel) or launch_hooked():
        def slow(**tensors):
            call = dict(given)
            for name, t in tensors.items():
                _late_address(name, t, expected)
                call[name] = t
            kernel[grid](*[call[n] for n in names[:len(args)]], **{k: call[k] for k in kwargs})

        slow.kernel = None
        return slow
    compiled = kernel.warmup(*args, grid=grid, **kwargs)
    compiled._init_handles()
    run, call = _launcher_call(compiled, grid, [_address(v) for v in bound_values(kernel, args, kwargs)])
    first = len(call) - len(names)
    positions = {name: first + names.index(name) for name in late}
    stream = functools.partial(triton.runtime.driver.active.get_current_stream, _device_index(args, kwargs))

    def launch(**tensors):
        for name, t in tensors.items():
            call[positions[name]] = _late_address(name, t, expected)
        call[3] = stream()
        run(*call)

    launch.kernel = compiled
    launch.keep_alive = tuple(v for k, v in given.items() if k not in expected)
    return _replayed(launch) if graph else launch


def _late_address(name, tensor, expected) -> int:
    """``tensor``'s address, after checking it may stand in for late parameter ``name``."""
    if name not in expected:
        raise TypeError(f"{name!r} is not a late parameter of this launch (late: {sorted(expected)})")
    dtype, aligned = expected[name]
    address = tensor.data_ptr()
    if tensor.dtype != dtype or (aligned and address % 16):
        raise ValueError(f"{name}: expected a {dtype} tensor{' 16-byte aligned' if aligned else ''}, "
                         f"got {tensor.dtype} at {address:#x}")
    return address


def _launcher_call(compiled, grid, values):
    """Triton's C launcher and its argument list (grid, a stream slot at index 3, metadata, then ``values``)."""
    launcher = compiled.run
    if getattr(launcher, "global_scratch_size", 0) or getattr(launcher, "profile_scratch_size", 0):
        run = launcher
        head = [compiled.function, compiled.packed_metadata, None, None, None]
    else:
        run = launcher.launch
        head = [compiled.function, launcher.launch_cooperative_grid, launcher.launch_pdl, None, None,
                compiled.packed_metadata, None, None, None]
    return run, [*grid, None, *head, *values]


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

    Triton 3.6 keeps the hooks in a ``HookChain`` that is never None; it counts
    as installed only when it holds a hook.
    """
    hooks = (knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook)
    return any(h is not None and getattr(h, "calls", True) for h in hooks)


def bound_values(kernel, args, kwargs) -> list:
    """The kernel's parameters in declaration order, defaults applied (what Triton's launcher takes)."""
    fn = getattr(kernel, "fn", kernel)
    params = {k: v for k, v in kwargs.items() if k not in LAUNCH_OPTIONS}
    bound = inspect.signature(fn).bind(*args, **params)
    bound.apply_defaults()
    return list(bound.arguments.values())


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
