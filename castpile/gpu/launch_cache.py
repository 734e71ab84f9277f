"""The library wrappers' prepared launches: bound once per kernel and options, issued on each call.

The collectives and the fused ops keep a :class:`LaunchCache` with their state
(``symm.launches``, :class:`castpile.gpu.symmetric.SymmetricTensor`; ``state.launches``)
and call :meth:`LaunchCache.issue` with the tensors that may change from call to call
(``out``, a residual, weights).  On a GPU, outside CUDA-graph capture, a call
whose per-call tensors the caller owns replays a one-kernel CUDA graph captured
for their addresses on first use (the last :data:`GRAPHS_KEPT` address sets are
kept; a kept graph also keeps its tensors alive); other calls launch a kernel
bound once, with the per-call tensors passed late (``castpile.gpu.launch.bind``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

#: Address sets per launch key whose replay graph is kept.
GRAPHS_KEPT = 4


@dataclass(eq=False)
class LaunchCache:
    """Launches by key (kernel and options): ``bound`` takes the per-call tensors late, ``graphs`` replay them.

    ``graphs[key]`` maps the per-call tensors' addresses to the replay captured for them.
    """

    bound: dict = field(default_factory=dict)
    graphs: dict = field(default_factory=dict)
    #: Whether owned calls may replay captured graphs.  :mod:`castpile.gpu.one_gpu` turns it off: a capture
    #: synchronises the device, which deadlocks while a peer rank's kernel on the same GPU waits for this rank.
    replay: bool = True
    #: Called with each new binding (the bound launch), before its first launch (or None).
    #: :mod:`castpile.gpu.one_gpu` passes a barrier of every rank: loading a kernel's module, and growing the
    #: local memory it needs, wait for the device, so no rank may start a kernel that waits for peers while a peer
    #: still has to do either.
    after_bind: Callable[[object], object] | None = None

    def issue(self, key, bind_for, tensors: dict, owned: bool, device_tensor: torch.Tensor) -> None:
        """Issue the launch cached under ``key``; ``bind_for(tensors, **options)`` binds it on first use.

        ``tensors``: kernel parameter name -> this call's tensor.  ``owned``: the
        caller passed them (or there are none), so a graph captured for their
        addresses may be kept and replayed.  ``device_tensor`` tells whether the
        launch runs on a GPU.
        """
        if self.replay and owned and device_tensor.is_cuda and not torch.cuda.is_current_stream_capturing():
            graphs = self.graphs.setdefault(key, {})
            addresses = tuple(t.data_ptr() for t in tensors.values())
            replay = graphs.get(addresses)
            if replay is None:
                replay = graphs[addresses] = bind_for(tensors, graph=True)
                self._bound(replay)
                if len(graphs) > GRAPHS_KEPT:
                    del graphs[next(iter(graphs))]
            replay()
            return
        launch = self.bound.get(key)
        if launch is None:
            launch = self.bound[key] = bind_for(tensors, late=tuple(tensors))
            self._bound(launch)
        launch(**tensors)

    def _bound(self, launch) -> None:
        if self.after_bind is not None:
            self.after_bind(launch)
