"""MoE token dispatch and combine (expert-parallel all-to-all): each token row crosses once per destination rank.

Every rank holds T tokens ``x`` [T, H] (bf16, fp16 or fp32), their routing
``topk_idx`` [T, K] (int32 or int64 expert ids in [0, E); an id outside that
range, such as -1, means "no expert" for that slot) and ``topk_weights`` [T, K]
(fp32).  E experts, E % W == 0: expert e lives on rank ``e // (E // W)`` as
local expert ``e % (E // W)``.  Top-k ids of a token are normally distinct;
a repeated id is simply two (token, expert) pairs.

:func:`dispatch` writes every token row directly into the receive buffer of
each rank that owns one of its experts, once per (token, destination rank)
however many of its experts that rank owns: one store of a (ranks, tokens,
hidden) tile through a pointer tile of row addresses, masked by "this token
goes to this rank".  Source s writes its rows into region s of the
receiver's ``recv_x`` [W, T, H], at row ``pos[t, d]`` = the number of tokens
before t that go to d, so a region holds its rows in source-token order.
Alongside each row travel the source token id, the K expert ids, the K
weights, and for each slot its pair rank j: the (token, slot) pairs of the
source before it (token-major) that chose the same expert.  With the
per-(source, expert) counts, which travel too, the receiver places every
(row, local expert) pair without a host round trip:

- ``grouped_rows`` int32 [W * T * min(K, E_local)]: received row ids
  ``s * T + p`` grouped by local expert (expert 0's first), within an expert
  by (source rank, source token, slot) order: the layout an expert GEMM wants,
  as the index that gather-style grouped GEMMs take (the ``sorted_token_ids``
  of vLLM's and SGLang's Triton fused MoE).  Entries from
  ``expert_offsets[E_local]`` on are not written.
- ``expert_counts`` [E_local] and ``expert_offsets`` [E_local + 1]: the pairs of
  each local expert and where they start in ``grouped_rows``.
- ``slot_positions`` int32 [W, T, K]: for each received row and top-k slot its
  place in ``grouped_rows``, or -1 (slot not on this rank): the permutation
  that undoes the grouping.
- ``recv_counts`` [W]: rows received from each source; ``recv_weights``
  [W, T, K] fp32, ``recv_src_token`` [W, T] and ``recv_topk_idx`` [W, T, K]
  (global ids, -1 for none) describe each received row.  Rows past
  ``recv_counts[s]`` in region s hold nothing of this call.

Why the grouping is an index and not a copy: a grouped copy would write each
received row once per local expert it chose, about K / (number of destination
ranks of a token) times (4x for K = 8 on 2 ranks), and read it back; that local
traffic would add much of the time of the deduplicated NVLink bytes again, where
the target is to stay within 1.2x of that NVLink limit (docs/fused.md).  A
gather-style GEMM reads the rows through ``grouped_rows`` instead.

:func:`combine` takes ``expert_out`` [W * T * min(K, E_local), H] in
``grouped_rows`` order.  On the expert's rank, each received row's partial is
the sum over its local slots k, k ascending, of ``recv_weights[k] *
expert_out[slot_positions[k]]``, accumulated in fp32 and rounded to the
dtype; it is pushed back to row (expert rank, token) of the source's combine
buffer [W, T, H] (one row per token and rank).  The source then sums, per
token, the partials of the ranks the token was sent to, in rank order, in
fp32, into ``out`` [T, H] in the dtype (a token sent nowhere gives zeros).

Both calls are collective (every rank calls them with the same state
configuration) and synchronise inside the kernels: block b of a rank meets
block b of every other rank, signal pads are left zero, no host barrier and no
read of device values on the host, so calls repeat back to back and can be
captured in CUDA graphs.  Each call issues prepared launches
(:func:`castpile.gpu.launch.bind`, the per-call tensors passed late; no graph is
kept per input address, since MoE inputs are usually fresh activations): two
kernels for dispatch (a local route count, then the dispatch), one for
combine.  The tensors :func:`dispatch` returns belong to the state and hold
the last dispatch's results until the next one; :func:`combine` uses what the
last dispatch recorded::

    state = moe.MoE.create(rank, world, tokens=T, hidden=H, topk=K, experts=E)   # collective, once
    got = moe.dispatch(state, x, topk_idx, topk_weights)
    y = grouped_gemm(got.recv_x.view(-1, H), got.grouped_rows, got.expert_offsets)   # yours
    out = moe.combine(state, y)

In the CPU simulator, create every rank's state before ``sim.run`` with
``MoE.create_all(world, ..., alloc=sim.symmetric_scratch)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import triton

from ..arguments import check_tensor, output
from ..device_share import multiprocessors
from ..launch import bind
from ..launch_cache import LaunchCache
from ..symmetric import Scratch
from . import moe_kernels_triton as kernels
from .state import FusedState

#: Tokens per tile: a store moves a (ranks, TOKEN_BLOCK, hidden block) tile.
TOKEN_BLOCK = 8
#: Largest hidden block (elements) of a tile: 2048 made combine faster at T = 4096 and left dispatch as it was
#: (docs/fused.md; loading a row tile's slot positions and weights once per tile instead of once per hidden
#: block was slower).
HIDDEN_BLOCK = 2048
#: Blocks of the simulator's kernels (several, so that ranges and carries between blocks are exercised).
SIM_BLOCKS = 3


@dataclass(frozen=True)
class Dispatched:
    """What :func:`dispatch` leaves on this rank (views of the state's buffers, valid until the next dispatch)."""

    recv_x: torch.Tensor
    recv_counts: torch.Tensor
    expert_counts: torch.Tensor
    expert_offsets: torch.Tensor
    grouped_rows: torch.Tensor
    slot_positions: torch.Tensor
    recv_weights: torch.Tensor
    recv_src_token: torch.Tensor
    recv_topk_idx: torch.Tensor


@dataclass(eq=False)
class MoEPlan:
    """What every rank's state shares: the sizes and the launch shape (``blocks``: the grid of every kernel)."""

    world_size: int
    tokens: int
    hidden: int
    topk: int
    experts: int
    dtype: torch.dtype
    blocks: int
    token_block: int
    hidden_block: int
    num_warps: int

    @property
    def local_experts(self) -> int:
        return self.experts // self.world_size

    @property
    def capacity_pairs(self) -> int:
        """Rows of ``grouped_rows`` and of ``combine``'s ``expert_out``: room for every (row, local expert) pair."""
        return self.world_size * self.tokens * min(self.topk, self.local_experts)

    @property
    def row(self) -> int:
        """Elements per row of ``recv_x`` and ``combine_buf``: ``hidden`` rounded up to 16 bytes."""
        per = 16 // self.dtype.itemsize
        return -(-self.hidden // per) * per


@dataclass(eq=False, repr=False)
class MoE(MoEPlan, FusedState):
    """One rank's state for :func:`dispatch` and :func:`combine`: symmetric buffers, local results, launches.

    Symmetric (peers write into them): ``recv_x`` [W, T, row] (rows padded to 16
    bytes: ``row`` elements), ``meta`` int32 [W, T, 1 + 3K] (token id, K expert
    ids, K pair ranks, K weights as fp32 bits), ``counts`` int32 [W, E + 1] (per
    source: its pairs per expert, its rows for this rank), ``ranges`` int32
    [blocks, W, 2] (per block and source: first row, rows), ``combine_buf``
    [W, T, row] and the signal pad ``pad`` int32 [blocks * W].  Local: ``hist``
    int32 [blocks, E + W] (the route counts), ``sends`` int32 [T, W] (token t
    went to rank d) and the tensors of :class:`Dispatched`.

    ``create(rank, world_size, tokens=, hidden=, topk=, experts=, dtype=bf16,
    **options)`` and ``create_all`` (:class:`~castpile.gpu.fused.state.FusedState`);
    ``options``: ``blocks`` (the grid; default the GPU's SM count, or
    :data:`SIM_BLOCKS` in the simulator), ``token_block``, ``hidden_block``, ``num_warps``.
    """

    rank: int
    recv_x: Scratch
    meta: Scratch
    counts: Scratch
    ranges: Scratch
    combine_buf: Scratch
    pad: Scratch
    hist: torch.Tensor = field(init=False)
    sends: torch.Tensor = field(init=False)
    grouped_rows: torch.Tensor = field(init=False)
    slot_positions: torch.Tensor = field(init=False)
    expert_counts: torch.Tensor = field(init=False)
    expert_offsets: torch.Tensor = field(init=False)
    recv_counts: torch.Tensor = field(init=False)
    dispatched: Dispatched = field(init=False)
    launches: LaunchCache = field(default_factory=LaunchCache)

    def __post_init__(self):
        W, T, K, H, EL = self.world_size, self.tokens, self.topk, self.hidden, self.local_experts

        def zeros(*shape):
            return self.pad.tensor.new_zeros(shape, dtype=torch.int32)

        self.hist, self.sends = zeros(self.blocks, self.experts + W), zeros(T, W)
        self.grouped_rows, self.slot_positions = zeros(self.capacity_pairs), zeros(W, T, K)
        self.expert_counts, self.expert_offsets, self.recv_counts = zeros(EL), zeros(EL + 1), zeros(W)
        meta = self.meta.tensor
        self.dispatched = Dispatched(
            recv_x=self.recv_x.tensor[:, :, :H],
            recv_counts=self.recv_counts,
            expert_counts=self.expert_counts,
            expert_offsets=self.expert_offsets,
            grouped_rows=self.grouped_rows,
            slot_positions=self.slot_positions,
            recv_weights=meta[:, :, 1 + 2 * K :].view(torch.float32),
            recv_src_token=meta[:, :, 0],
            recv_topk_idx=meta[:, :, 1 : 1 + K],
        )

    def __repr__(self):
        return (
            f"MoE(rank={self.rank}, world_size={self.world_size}, tokens={self.tokens}, hidden={self.hidden}, "
            f"topk={self.topk}, experts={self.experts}, dtype={self.dtype}, blocks={self.blocks})"
        )

    @classmethod
    def plan(
        cls,
        world_size: int,
        device: torch.device,
        *,
        tokens: int,
        hidden: int,
        topk: int,
        experts: int,
        dtype: torch.dtype = torch.bfloat16,
        blocks: int | None = None,
        token_block: int = TOKEN_BLOCK,
        hidden_block: int | None = None,
        num_warps: int = 8,
    ) -> MoEPlan:
        """Check the configuration and choose the launch shape (the same on every rank)."""
        if min(world_size, tokens, hidden, topk, experts) < 1 or experts % world_size:
            raise ValueError(
                f"MoE: need positive sizes and experts ({experts}) a multiple of world_size ({world_size})"
            )
        if dtype not in (torch.bfloat16, torch.float16, torch.float32):
            raise ValueError(f"MoE: dtype must be bf16, fp16 or fp32, got {dtype}")
        if blocks is None:
            blocks = multiprocessors(device) if device.type == "cuda" else SIM_BLOCKS
        hidden_block = min(HIDDEN_BLOCK, triton.next_power_of_2(hidden)) if hidden_block is None else hidden_block
        blocks = max(1, min(blocks, triton.cdiv(tokens, token_block)))
        return MoEPlan(world_size, tokens, hidden, topk, experts, dtype, blocks, token_block, hidden_block, num_warps)

    @staticmethod
    def buffers(plan: MoEPlan) -> dict:
        """The symmetric buffers: name -> (shape, dtype)."""
        W, T, row = plan.world_size, plan.tokens, plan.row
        return {
            "recv_x": ((W, T, row), plan.dtype),
            "meta": ((W, T, 1 + 3 * plan.topk), torch.int32),
            "counts": ((W, plan.experts + 1), torch.int32),
            "ranges": ((plan.blocks, W, 2), torch.int32),
            "combine_buf": ((W, T, row), plan.dtype),
            "pad": ((plan.blocks * W,), torch.int32),
        }


def dispatch(state: MoE, x: torch.Tensor, topk_idx: torch.Tensor, topk_weights: torch.Tensor) -> Dispatched:
    """Send this rank's tokens to the ranks of their experts and group what arrives by local expert (collective).

    ``x`` [T, H] in the state's dtype, ``topk_idx`` [T, K] int32 or int64,
    ``topk_weights`` [T, K] fp32, all contiguous.  Returns ``state.dispatched``
    (see the module docstring), refilled by this call.
    """
    T, H, K = state.tokens, state.hidden, state.topk
    check_tensor("x", x, (T, H), state.dtype)
    check_tensor("topk_idx", topk_idx, (T, K), torch.int32, torch.int64)
    check_tensor("topk_weights", topk_weights, (T, K), torch.float32)

    def route(tensors, **extra):
        return bind(
            kernels.moe_route,
            (state.blocks,),
            tensors["topk_idx"],
            state.hist,
            T,
            K=K,
            E=state.experts,
            EL=state.local_experts,
            WORLD=state.world_size,
            TB=state.token_block,
            num_warps=4,
            **extra,
        )

    def send(tensors, **extra):
        return bind(
            kernels.moe_dispatch,
            (state.blocks,),
            tensors["x"],
            tensors["topk_idx"],
            tensors["topk_weights"],
            state.hist,
            state.sends,
            *_symmetric(state.recv_x, state.meta, state.counts, state.ranges, state.pad),
            state.grouped_rows,
            state.slot_positions,
            state.expert_counts,
            state.expert_offsets,
            state.recv_counts,
            state.rank,
            T,
            H=H,
            ROW=state.row,
            K=K,
            E=state.experts,
            WORLD=state.world_size,
            TB=state.token_block,
            HB=state.hidden_block,
            num_warps=state.num_warps,
            **extra,
        )

    state.launches.issue(("route", topk_idx.dtype), route, {"topk_idx": topk_idx}, False, x)
    tensors = {"x": x, "topk_idx": topk_idx, "topk_weights": topk_weights}
    state.launches.issue(("dispatch", topk_idx.dtype), send, tensors, False, x)
    return state.dispatched


def combine(state: MoE, expert_out: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Weigh and return the expert outputs to the tokens' ranks and sum them per token (collective).

    ``expert_out`` [``state.capacity_pairs``, H] in the state's dtype holds the
    experts' outputs in the last dispatch's ``grouped_rows`` order (rows past
    ``expert_offsets[E_local]`` are not read).  Returns ``out`` [T, H] (new if None).
    """
    check_tensor("expert_out", expert_out, (state.capacity_pairs, state.hidden), state.dtype)
    out = output(expert_out, out, (state.tokens, state.hidden), "combine")

    def reduce(tensors, **extra):
        return bind(
            kernels.moe_combine,
            (state.blocks,),
            tensors["expert_out"],
            tensors["out"],
            state.slot_positions,
            state.sends,
            state.meta.tensor,
            state.ranges.tensor,
            *_symmetric(state.combine_buf, state.pad),
            state.rank,
            state.tokens,
            H=state.hidden,
            ROW=state.row,
            K=state.topk,
            WORLD=state.world_size,
            TB=state.token_block,
            HB=state.hidden_block,
            num_warps=state.num_warps,
            **extra,
        )

    state.launches.issue("combine", reduce, {"expert_out": expert_out, "out": out}, False, out)
    return out


def _symmetric(*scratches: Scratch) -> list:
    """Each scratch's tensor and address table, flattened as the kernels take them."""
    return [t for s in scratches for t in (s.tensor, s.ptrs)]


__all__ = ["HIDDEN_BLOCK", "SIM_BLOCKS", "TOKEN_BLOCK", "Dispatched", "MoE", "MoEPlan", "combine", "dispatch"]
