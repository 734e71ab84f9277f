"""How a fused op's per-rank state is made: a plan, then its symmetric buffers from an allocator, one state per rank.

Each fused op with state (:mod:`castpile.gpu.fused.moe`, :mod:`castpile.gpu.fused.tp_gemm`)
has a plan, a dataclass of its sizes and launch shape that is the same on every rank,
and a state class that extends the plan and :class:`FusedState` with the rank, its
symmetric buffers (each a :class:`castpile.gpu.symmetric.Scratch`, named as
:meth:`FusedState.buffers` names them) and what ``__post_init__`` derives from them
(local tensors, address tables).  Plans and states compare by identity.

The allocator is the caller's to choose: :meth:`FusedState.create` takes one rank's
(default :func:`castpile.gpu.runtime.symmetric_scratch`, on the GPU),
:meth:`FusedState.create_all` one that allocates for every rank of one process, which
is what the CPU simulator does (pass :func:`castpile.gpu.sim.symmetric_scratch`); the
library never imports the simulator.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import fields
from typing import Any

import torch

from .. import runtime


class FusedState(ABC):
    """``create`` and ``create_all`` of a state class whose :meth:`plan` and :meth:`buffers` say what it holds."""

    @classmethod
    @abstractmethod
    def plan(cls, world_size: int, device: torch.device, *args: Any, **arguments: Any):
        """The checked sizes and the launch shape for ``device`` (the same on every rank): the op's plan."""

    @staticmethod
    @abstractmethod
    def buffers(plan) -> dict:
        """The symmetric buffers of a state of ``plan``: name -> (shape, dtype)."""

    @classmethod
    def create(cls, rank: int, world_size: int, *, alloc=runtime.symmetric_scratch, **arguments):
        """This rank's state on this process's GPU (collective: every rank calls it with the same arguments).

        ``alloc(shape, dtype)`` returns this rank's :class:`~castpile.gpu.symmetric.Scratch`
        of a zeroed symmetric buffer (collective); ``arguments`` are :meth:`plan`'s.
        """
        plan = cls.plan(world_size, torch.device("cuda", torch.cuda.current_device()), **arguments)
        # The call-arg ignores: each state class is a dataclass whose fields are rank, the plan's and the buffers
        return cls(
            rank=rank,
            **_values(plan),
            **{
                name: alloc(shape, dtype)  # type: ignore[call-arg]
                for name, (shape, dtype) in cls.buffers(plan).items()
            },
        )

    @classmethod
    def create_all(cls, world_size: int, *, alloc, device=None, **arguments) -> list:
        """Every rank's state in this process (call before ``sim.run`` or ``one_gpu.run``).

        ``alloc(world_size, shape, dtype)`` returns one zeroed :class:`~castpile.gpu.symmetric.Scratch`
        per rank: :func:`castpile.gpu.sim.symmetric_scratch` over host memory (``device`` None: the
        CPU, launch shapes default to the op's ``SIM_BLOCKS`` blocks), or
        :func:`castpile.gpu.one_gpu.symmetric_scratch` on one GPU (``device`` that GPU: launch shapes
        as on GPUs, for this rank's share of its multiprocessors).  ``arguments`` are :meth:`plan`'s.
        """
        plan = cls.plan(world_size, torch.device("cpu") if device is None else torch.device(device), **arguments)
        per_rank = {name: alloc(world_size, shape, dtype) for name, (shape, dtype) in cls.buffers(plan).items()}
        return [
            cls(rank=r, **_values(plan), **{name: scratch[r] for name, scratch in per_rank.items()})  # type: ignore[call-arg]  # as in create
            for r in range(world_size)
        ]


def _values(plan) -> dict:
    """The plan's fields by name (a state's constructor takes them)."""
    return {f.name: getattr(plan, f.name) for f in fields(plan)}
