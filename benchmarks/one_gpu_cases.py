"""The cases benchmarks/check_one_gpu.py checks: every collective and fused op of the library, with its inputs and torch references.

Each :class:`Case` makes one op's symmetric buffers at W ranks on one GPU; ``prepare`` writes a rank's
integer-valued inputs for one call and returns the references, computed from the inputs alone; ``launch``
calls the library.  :func:`cases` names them all; :func:`collectives_sweep` names the collectives at every size and
dtype that benchmarks/check_collectives.py checks on two GPUs.
"""

from __future__ import annotations

import functools

import torch

from castpile.gpu import collectives, one_gpu, ops
from castpile.gpu.fused import moe, rmsnorm, tp_gemm
from castpile.gpu.symmetric import LOW_LATENCY_MAX_BYTES

EPS = 1e-5
#: (rtol, atol) of the RMSNorm results against torch in fp32 (the sums before the norm are exact).
TOLERANCE = {torch.float32: (1e-5, 1e-5), torch.bfloat16: (2**-7, 1e-2)}


def pattern(ranks, it: int, n: int, device, span: int = 17) -> torch.Tensor:
    """Rank r's input of call ``it`` for every r in ``ranks``: integers in [-(span // 2), span // 2], [len(ranks), n]."""
    r = torch.as_tensor(ranks, device=device)[:, None]
    i = torch.arange(n, device=device)[None, :]
    return (i * (2 * r + 1) + 7 * it + r) % span - span // 2


class Case:
    """One op checked at one W: ``prepare`` writes rank's inputs and returns the references, ``launch`` calls the
    library and returns what to compare (key -> tensor), calling ``pause()`` between its collective steps (a host
    barrier in ``--phased`` runs); ``pads`` must be all zero at the end; ``info`` is recorded."""

    tolerance: tuple | None = None  # None: exact

    def __init__(self, world: int, device):
        self.world, self.device = world, device
        self.info = {}

    def pads(self) -> list[torch.Tensor]:
        return []


class AllReduce(Case):
    def __init__(self, world, device, *, variant, n, dtype, push_scratch=False):
        super().__init__(world, device)
        self.variant, self.n, self.dtype = variant, n, dtype
        self.symm = one_gpu.symmetric_empty(world, (n,), dtype, push_scratch=push_scratch, device=device)
        self.outs = [torch.empty(n, dtype=dtype, device=device) for _ in range(world)]
        h = self.symm[0]
        self.info = dict(
            dtype=str(dtype),
            n=n,
            max_blocks=h.max_blocks,
            low_latency_blocks=None if h.low_latency is None else h.low_latency.epochs.numel(),
        )

    def prepare(self, rank, it):
        x = pattern(range(self.world), it, self.n, self.device)
        self.symm[rank].tensor.copy_(x[rank].to(self.dtype))
        return {"sum": x.sum(0).to(self.dtype)}

    def launch(self, rank, it, pause):
        s, out = self.symm[rank], self.outs[rank]
        if self.variant == "one_shot":
            return {"sum": collectives.all_reduce_one_shot(s, out)}
        if self.variant == "low_latency":
            return {"sum": collectives.all_reduce_low_latency(s, out)}
        if self.variant == "auto":
            return {"sum": collectives.all_reduce(s, out)}
        return {"sum": collectives.all_reduce_two_shot(s, push=self.variant == "two_shot_push")}

    def pads(self):
        return [h.signal_pad for h in self.symm]


class Gather(Case):
    def __init__(self, world, device, *, op, n, dtype):
        super().__init__(world, device)
        self.op, self.n, self.dtype = op, n, dtype
        self.symm = one_gpu.symmetric_empty(world, (n,), dtype, device=device)
        self.outs = [
            torch.empty((world, n) if op == "all_gather" else (n // world,), dtype=dtype, device=device)
            for _ in range(world)
        ]
        self.info = dict(dtype=str(dtype), n=n, max_blocks=self.symm[0].max_blocks)

    def prepare(self, rank, it):
        x = pattern(range(self.world), it, self.n, self.device)
        self.symm[rank].tensor.copy_(x[rank].to(self.dtype))
        if self.op == "all_gather":
            return {"out": x.to(self.dtype)}
        return {"out": x.sum(0).view(self.world, -1)[rank].to(self.dtype)}

    def launch(self, rank, it, pause):
        call = collectives.all_gather if self.op == "all_gather" else collectives.reduce_scatter
        return {"out": call(self.symm[rank], self.outs[rank])}

    def pads(self):
        return [h.signal_pad for h in self.symm]


class RMSNorm(Case):
    def __init__(self, world, device, *, rows, d, dtype, method, residual, block=None):
        super().__init__(world, device)
        self.rows, self.d, self.dtype, self.method, self.residual = rows, d, dtype, method, residual
        self.block = block  # None: the kernel's own (the row in one pass, up to rmsnorm.MAX_BLOCK)
        self.tolerance = TOLERANCE[dtype]
        self.symm = one_gpu.symmetric_empty(world, (rows, d), dtype, device=device)
        self.weight = (torch.arange(d, device=device) % 7 / 4 + 0.5).to(dtype)
        self.residuals = [torch.empty((rows, d), dtype=dtype, device=device) for _ in range(world)]
        self.outs = [torch.empty((rows, d), dtype=dtype, device=device) for _ in range(world)]
        self.info = dict(
            dtype=str(dtype), rows=rows, D=d, method=method, residual=residual, block=block,
            max_blocks=self.symm[0].max_blocks,
        )  # fmt: skip

    def prepare(self, rank, it):
        x = pattern(range(self.world), it, self.rows * self.d, self.device)
        self.symm[rank].tensor.view(-1).copy_(x[rank].to(self.dtype))
        summed = x.sum(0).view(self.rows, self.d).to(self.dtype)
        refs = {}
        if self.residual:
            res = pattern([0], it + 3, self.rows * self.d, self.device)[0].view(self.rows, self.d).to(self.dtype)
            self.residuals[rank].copy_(res)
            summed = res + summed
            refs["residual"] = summed
        t = summed.float()
        refs["y"] = t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + EPS) * self.weight.float()
        return refs

    def launch(self, rank, it, pause):
        s, out = self.symm[rank], self.outs[rank]
        if self.residual:
            y = rmsnorm.all_reduce_residual_rmsnorm(
                s, self.residuals[rank], self.weight, EPS, out, method=self.method, block=self.block
            )
            return {"y": y, "residual": self.residuals[rank]}
        return {"y": rmsnorm.all_reduce_rmsnorm(s, self.weight, EPS, out, method=self.method, block=self.block)}

    def pads(self):
        return [h.signal_pad for h in self.symm]


class MoE(Case):
    """Dispatch, a stand-in expert layer (global expert e scales its rows by e + 1), combine: exact."""

    def __init__(self, world, device, *, tokens, hidden, topk, through_ops=False):
        super().__init__(world, device)
        self.T, self.H, self.K, self.E = tokens, hidden, topk, 4 * world
        self.states = one_gpu.create_all(
            moe.MoE, world, device=device, tokens=tokens, hidden=hidden, topk=topk, experts=self.E
        )
        self.through_ops = through_ops
        self.names = [ops.register(s) for s in self.states] if through_ops else None
        self.inputs = [None] * world
        st = self.states[0]
        self.info = dict(
            tokens=tokens, hidden=hidden, topk=topk, experts=self.E, blocks=st.blocks, through_ops=through_ops
        )

    def routing(self, rank, it):
        g = torch.Generator(device=self.device).manual_seed(1000003 * rank + it)
        x = torch.randint(-2, 3, (self.T, self.H), generator=g, device=self.device).to(torch.bfloat16)
        idx = torch.rand((self.T, self.E), generator=g, device=self.device).argsort(1)[:, : self.K].to(torch.int32)
        idx[it % self.T :: 7, -1] = -1  # some slots routed nowhere
        w = torch.randint(1, 3, (self.T, self.K), generator=g, device=self.device).float() / 2
        return x, idx, w

    def prepare(self, rank, it):
        x, idx, w = self.inputs[rank] = self.routing(rank, it)
        valid = idx >= 0
        scale = (w.double() * (idx + 1).double() * valid).sum(1)
        per = self.E // self.world
        received = torch.zeros(self.world, dtype=torch.int32, device=self.device)
        for source in range(self.world):
            src_idx = idx if source == rank else self.routing(source, it)[1]
            owner = torch.where(src_idx >= 0, src_idx // per, -1)
            received[source] = (owner == rank).any(1).sum()
        return {"out": (scale[:, None] * x.double()).to(x.dtype), "recv_counts": received}

    def launch(self, rank, it, pause):
        x, idx, w = self.inputs[rank]
        st = self.states[rank]
        if self.through_ops:
            d = moe.Dispatched(*torch.ops.castpile.moe_dispatch(x, idx, w, self.names[rank]))
        else:
            d = moe.dispatch(st, x, idx, w)
        pause()
        places = torch.arange(d.grouped_rows.numel(), dtype=torch.int32, device=x.device)
        expert = (places[:, None] >= d.expert_offsets[None, 1:]).sum(1)
        rows = d.recv_x.flatten(0, 1)[d.grouped_rows.long()]
        expert_out = rows * (rank * st.local_experts + expert + 1)[:, None].to(rows.dtype)
        pause()
        if self.through_ops:
            out = torch.ops.castpile.moe_combine(expert_out, d.slot_positions, self.names[rank])
        else:
            out = moe.combine(st, expert_out)
        return {"out": out, "recv_counts": d.recv_counts}

    def pads(self):
        return [s.pad.tensor for s in self.states]


class AllGatherMatmul(Case):
    def __init__(self, world, device, *, shard_rows, k, n):
        super().__init__(world, device)
        self.m, self.k, self.n = shard_rows * world, k, n
        self.states = one_gpu.create_all(tp_gemm.AllGatherMatmul, world, device=device, m=self.m, k=k, n=n)
        self.bs = [None] * world
        self.outs = [torch.empty((self.m, n), dtype=torch.bfloat16, device=device) for _ in range(world)]
        st = self.states[0]
        self.info = dict(
            m=self.m,
            k=k,
            n=n,
            blocks=st.comm_blocks + st.consumers,
            one_wave=st.one_wave,
            k_segment=st.k_segment,
            chunk_rows=st.chunk_rows,
            tma=st.config.tma,
        )

    def prepare(self, rank, it):
        a = pattern(range(self.world), it, self.m // self.world * self.k, self.device, span=3)
        b = pattern([it % 5], it, self.k * self.n, self.device, span=3)[0].view(self.k, self.n)
        self.states[rank].a_shard.copy_(a[rank].view(-1, self.k).to(torch.bfloat16))
        self.bs[rank] = b.to(torch.bfloat16)
        return {"out": (a.view(self.m, self.k).float() @ b.float()).to(torch.bfloat16)}

    def launch(self, rank, it, pause):
        return {"out": tp_gemm.all_gather_matmul(self.states[rank], None, self.bs[rank], self.outs[rank])}

    def pads(self):
        return [t for s in self.states for t in (s.flags.tensor, s.pad.tensor)]


class MatmulReduceScatter(Case):
    def __init__(self, world, device, *, m, k, n):
        super().__init__(world, device)
        self.m, self.k, self.n = m, k, n
        self.states = one_gpu.create_all(tp_gemm.MatmulReduceScatter, world, device=device, m=m, k=k, n=n)
        self.inputs = [None] * world
        self.outs = [torch.empty((m // world, n), dtype=torch.bfloat16, device=device) for _ in range(world)]
        self.info = dict(m=m, k=k, n=n, state=repr(self.states[0]))

    def prepare(self, rank, it):
        a = pattern(range(self.world), it, self.m * self.k, self.device, span=3).view(self.world, self.m, self.k)
        b = pattern(range(self.world), it + 1, self.k * self.n, self.device, span=3).view(self.world, self.k, self.n)
        self.inputs[rank] = (a[rank].to(torch.bfloat16).contiguous(), b[rank].to(torch.bfloat16).contiguous())
        total = torch.einsum("wmk,wkn->mn", a.float(), b.float())
        return {"out": total.view(self.world, -1, self.n)[rank].to(torch.bfloat16)}

    def launch(self, rank, it, pause):
        a, b = self.inputs[rank]
        return {"out": tp_gemm.matmul_reduce_scatter(self.states[rank], a, b, self.outs[rank])}

    def pads(self):
        return [t for s in self.states for t in _zeroed_buffers(s)]


def _zeroed_buffers(state) -> list[torch.Tensor]:
    """The int32 symmetric buffers (flags, pads) of a fused op's state."""
    return [s.tensor for s in vars(state).values() if hasattr(s, "ptrs") and s.tensor.dtype == torch.int32]


class TorchOps(Case):
    """torch.ops.castpile's collectives, eager, inputs staged from tensors outside the symmetric buffer."""

    def __init__(self, world, device, *, n, dtype):
        super().__init__(world, device)
        self.n, self.dtype = n, dtype
        self.symm = one_gpu.symmetric_empty(world, (n,), dtype, device=device)
        self.names = [ops.register(s) for s in self.symm]
        self.inputs = [torch.empty(n, dtype=dtype, device=device) for _ in range(world)]
        self.info = dict(dtype=str(dtype), n=n, low_latency=self.symm[0].low_latency is not None)

    def prepare(self, rank, it):
        x = pattern(range(self.world), it, self.n, self.device)
        self.inputs[rank].copy_(x[rank].to(self.dtype))
        total = x.sum(0).to(self.dtype)
        return {
            "all_reduce": total,
            "one_shot": total,
            "all_gather": x.to(self.dtype),
            "reduce_scatter": total.view(self.world, -1)[rank],
        }

    def launch(self, rank, it, pause):
        c, name, x = torch.ops.castpile, self.names[rank], self.inputs[rank]
        return {
            "all_reduce": c.all_reduce(x, name),
            "one_shot": c.all_reduce(x, name, "one_shot"),
            "all_gather": c.all_gather(x, name),
            "reduce_scatter": c.reduce_scatter(x, name),
        }

    def pads(self):
        return [h.signal_pad for h in self.symm]


def cases(world: int, device) -> dict:
    """name -> a function making the case at ``world`` ranks."""
    bf16, fp32 = torch.bfloat16, torch.float32
    return {
        "all_reduce_one_shot_small": lambda: AllReduce(world, device, variant="one_shot", n=world * 4096, dtype=bf16),
        "all_reduce_one_shot_large": lambda: AllReduce(world, device, variant="one_shot", n=1 << 20, dtype=fp32),
        "all_reduce_low_latency": lambda: AllReduce(world, device, variant="low_latency", n=16384, dtype=bf16),
        "all_reduce_auto": lambda: AllReduce(world, device, variant="auto", n=3000, dtype=fp32),
        "all_reduce_two_shot": lambda: AllReduce(world, device, variant="two_shot", n=1 << 20, dtype=bf16),
        "all_reduce_two_shot_push": lambda: AllReduce(
            world, device, variant="two_shot_push", n=(1 << 20) + 40, dtype=fp32, push_scratch=True
        ),
        "all_gather": lambda: Gather(world, device, op="all_gather", n=100_000, dtype=bf16),
        "reduce_scatter": lambda: Gather(world, device, op="reduce_scatter", n=world * 50_000, dtype=fp32),
        "rmsnorm_low_latency_residual": lambda: RMSNorm(
            world, device, rows=16, d=2048, dtype=bf16, method="low_latency", residual=True
        ),
        "rmsnorm_one_shot_residual": lambda: RMSNorm(
            world, device, rows=256, d=2048, dtype=bf16, method="one_shot", residual=True
        ),
        "rmsnorm_one_shot": lambda: RMSNorm(
            world, device, rows=8, d=4096, dtype=fp32, method="one_shot", residual=False
        ),
        # rows read in column blocks, the last one ragged (the kernel's two-pass loop)
        "rmsnorm_one_shot_column_blocks": lambda: RMSNorm(
            world, device, rows=40, d=3000, dtype=bf16, method="one_shot", residual=True, block=1024
        ),
        "moe": lambda: MoE(world, device, tokens=128, hidden=1024, topk=2),
        "moe_ops": lambda: MoE(world, device, tokens=64, hidden=512, topk=3, through_ops=True),
        "all_gather_matmul_one_wave": lambda: AllGatherMatmul(world, device, shard_rows=32, k=512, n=256),
        "all_gather_matmul_rows": lambda: AllGatherMatmul(world, device, shard_rows=256, k=1024, n=512),
        # shards that are not whole row tiles: TMA reads A through a descriptor per shard
        "all_gather_matmul_ragged_rows": lambda: AllGatherMatmul(world, device, shard_rows=200, k=1024, n=512),
        "all_gather_matmul_k_segment": lambda: AllGatherMatmul(world, device, shard_rows=64, k=4096, n=2048),
        "matmul_reduce_scatter": lambda: MatmulReduceScatter(world, device, m=world * 128, k=256, n=512),
        # from 1024 rows the wide tile (128 x 256, 8 warps) at every W, not at W = 8 alone
        "matmul_reduce_scatter_wide": lambda: MatmulReduceScatter(world, device, m=world * 512, k=256, n=512),
        "torch_ops": lambda: TorchOps(world, device, n=world * 2048, dtype=bf16),
    }


#: Each rank's input in bytes, as benchmarks/check_collectives.py checks them on two GPUs.
SWEEP_BYTES = [4 << 10, 32 << 10, 256 << 10, 2 << 20, 16 << 20, 64 << 20]
SWEEP_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def collectives_sweep(world: int, device) -> dict:
    """name -> a function making the case: every collective at every size and dtype of check_collectives.py.

    Sizes are rounded down to a multiple of ``world`` elements (reduce-scatter's shards); the low-latency
    all-reduce is checked where it applies (inputs of at most ``LOW_LATENCY_MAX_BYTES``).
    """
    made = {}
    for dname, dtype in SWEEP_DTYPES.items():
        for nbytes in SWEEP_BYTES:
            n = nbytes // dtype.itemsize // world * world
            tag = f"{dname}_{nbytes}B"
            variants = ["one_shot", "two_shot", "two_shot_push"]
            variants += ["low_latency"] if n * dtype.itemsize <= LOW_LATENCY_MAX_BYTES else []
            for variant in variants:
                made[f"all_reduce_{variant}_{tag}"] = functools.partial(
                    AllReduce, world, device, variant=variant, n=n, dtype=dtype, push_scratch=variant == "two_shot_push"
                )
            for op in ("all_gather", "reduce_scatter"):
                made[f"{op}_{tag}"] = functools.partial(Gather, world, device, op=op, n=n, dtype=dtype)
    return made


#: What ``check_one_gpu.py --set`` chooses from.
CASE_SETS = {"library": cases, "collectives_sweep": collectives_sweep}
