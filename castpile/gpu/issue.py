"""Issuing a library kernel's prepared launch on each call: a replayed one-kernel graph, or a bound launch.

The collectives and the fused ops keep their launches in ``symm.launches``
(:class:`castpile.gpu.runtime.SymmetricTensor`), keyed by kernel and options,
and call :func:`issue` with the tensors that may change from call to call
(``out``, a residual, weights).  On a GPU, outside CUDA-graph capture, a call
whose per-call tensors the caller owns replays a one-kernel CUDA graph captured
for their addresses on first use (the last :data:`GRAPHS_KEPT` address sets are
kept; a kept graph also keeps its tensors alive); other calls launch a kernel
bound once, with the per-call tensors passed late (``castpile.gpu.launch.bind``).
"""

import torch

#: Address sets per collective and tensor whose replay graph is kept.
GRAPHS_KEPT = 4


def issue(launches: dict, key, bind_for, tensors: dict, owned: bool, device_tensor: torch.Tensor) -> None:
    """Issue the launch cached under ``key``; ``bind_for(tensors, **options)`` binds it on first use.

    ``tensors``: kernel parameter name -> this call's tensor.  ``owned``: the
    caller passed them (or there are none), so a graph captured for their
    addresses may be kept and replayed.  ``device_tensor`` tells whether the
    launch runs on a GPU.
    """
    if owned and device_tensor.is_cuda and not torch.cuda.is_current_stream_capturing():
        graphs = launches.setdefault((key, "graphs"), {})
        addresses = tuple(t.data_ptr() for t in tensors.values())
        replay = graphs.get(addresses)
        if replay is None:
            replay = graphs[addresses] = bind_for(tensors, graph=True)
            if len(graphs) > GRAPHS_KEPT:
                del graphs[next(iter(graphs))]
        replay()
        return
    launch = launches.get(key)
    if launch is None:
        launch = launches[key] = bind_for(tensors, late=tuple(tensors))
    launch(**tensors)


def output(like: torch.Tensor, out, shape, name: str) -> torch.Tensor:
    """``out``, or a new tensor like ``like``; checked to be contiguous with ``shape`` and ``like``'s dtype."""
    if out is None:
        return like.new_empty(shape)
    if out.shape != shape or out.dtype != like.dtype or not out.is_contiguous():
        raise ValueError(f"{name}: out must be a contiguous {like.dtype} tensor of shape {tuple(shape)}, "
                         f"got {out.dtype} {tuple(out.shape)}{'' if out.is_contiguous() else ' (not contiguous)'}")
    return out
