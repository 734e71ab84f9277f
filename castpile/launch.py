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
launch hook is installed, the callable falls back to ``kernel[grid](...)``.

``graph=True`` goes further: the one launch is captured once into a CUDA graph
and each call replays it on the current stream (Triton's C launcher costs
about 22 us of host time per call on the H200 hosts, a graph replay far less);
while the current stream is itself being captured, the call launches directly.
"""

from __future__ import annotations

import inspect

import triton
from triton import knobs

#: Keyword arguments that configure the launch rather than bind a kernel parameter.
LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion", "launch_cooperative_grid",
                  "launch_pdl")


def bind(kernel, grid, *args, graph=False, **kwargs):
    """A zero-argument callable that launches ``kernel[grid](*args, **kwargs)``; compiles now if needed."""
    grid = tuple(grid) + (1,) * (3 - len(grid))

    def slow():
        kernel[grid](*args, **kwargs)

    slow.kernel = None
    if _interpreted(kernel) or knobs.runtime.launch_enter_hook is not None:
        return slow
    compiled = kernel.warmup(*args, grid=grid, **kwargs)
    compiled._init_handles()
    launcher = compiled.run
    values = tuple(_address(v) for v in bound_values(kernel, args, kwargs))
    device = _device_index(args, kwargs)
    stream_of = triton.runtime.driver.active.get_current_stream
    gx, gy, gz = grid
    if getattr(launcher, "global_scratch_size", 0) or getattr(launcher, "profile_scratch_size", 0):
        run = launcher
        tail = (compiled.function, compiled.packed_metadata, None, None, None) + values

        def launch():
            run(gx, gy, gz, stream_of(device), *tail)
    else:
        run = launcher.launch
        tail = (compiled.function, launcher.launch_cooperative_grid, launcher.launch_pdl, None, None,
                compiled.packed_metadata, None, None, None) + values

        def launch():
            run(gx, gy, gz, stream_of(device), *tail)

    launch.kernel = compiled
    launch.keep_alive = (args, kwargs)
    return _replayed(launch) if graph else launch


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
