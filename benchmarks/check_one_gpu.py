"""Check every collective and fused op of the library with W ranks on one GPU (castpile.gpu.one_gpu), many times over.

For each W and each case: ``--iters`` back-to-back calls on every rank, each on new
integer-valued inputs (so sums are exact), against torch references computed from the
inputs alone (every rank can make every rank's input); then every signal pad and flag
must be zero.  Ranks are skewed: their threads start in reverse rank order, and at random
calls a rank sleeps on the host or queues a GPU sleep on its stream before the call.
Each W runs in a child process under a time limit, so a hang costs that W alone.

    python benchmarks/check_one_gpu.py --worlds 2 3 4 8 --iters 1000 --out docs/data/check-one-gpu.json

``--phased`` (what benchmarks/sanitize_one_gpu.sh runs under compute-sanitizer) puts a host
barrier between making the inputs, the library calls and the comparison, and
no sleeps: with ``PYTORCH_NO_CUDA_MEMORY_CACHING=1`` every free synchronises the device,
which must never happen while a peer's kernel waits for this rank.
"""

from __future__ import annotations

import argparse
import faulthandler
import gc
import os
import json
import random
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]

from castpile.gpu import collectives, one_gpu, ops  # noqa: E402
from castpile.gpu.fused import moe, rmsnorm, tp_gemm  # noqa: E402

EPS = 1e-5
#: (rtol, atol) of the RMSNorm results against torch in fp32 (the sums before the norm are exact).
#: Seconds a case may take in a child before it counts as hung.
CASE_LIMIT_S = 150.0
TOLERANCE = {torch.float32: (1e-5, 1e-5), torch.bfloat16: (2 ** -7, 1e-2)}


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
        self.info = dict(dtype=str(dtype), n=n, max_blocks=h.max_blocks,
                         low_latency_blocks=None if h.low_latency is None else h.low_latency.epochs.numel())

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
        self.outs = [torch.empty((world, n) if op == "all_gather" else (n // world,), dtype=dtype, device=device)
                     for _ in range(world)]
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
    def __init__(self, world, device, *, rows, d, dtype, method, residual):
        super().__init__(world, device)
        self.rows, self.d, self.dtype, self.method, self.residual = rows, d, dtype, method, residual
        self.tolerance = TOLERANCE[dtype]
        self.symm = one_gpu.symmetric_empty(world, (rows, d), dtype, device=device)
        self.weight = (torch.arange(d, device=device) % 7 / 4 + 0.5).to(dtype)
        self.residuals = [torch.empty((rows, d), dtype=dtype, device=device) for _ in range(world)]
        self.outs = [torch.empty((rows, d), dtype=dtype, device=device) for _ in range(world)]
        self.info = dict(dtype=str(dtype), rows=rows, D=d, method=method, residual=residual,
                         max_blocks=self.symm[0].max_blocks)

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
            y = rmsnorm.all_reduce_residual_rmsnorm(s, self.residuals[rank], self.weight, EPS, out, method=self.method)
            return {"y": y, "residual": self.residuals[rank]}
        return {"y": rmsnorm.all_reduce_rmsnorm(s, self.weight, EPS, out, method=self.method)}

    def pads(self):
        return [h.signal_pad for h in self.symm]


class MoE(Case):
    """Dispatch, a stand-in expert layer (global expert e scales its rows by e + 1), combine: exact."""

    def __init__(self, world, device, *, tokens, hidden, topk, through_ops=False):
        super().__init__(world, device)
        self.T, self.H, self.K, self.E = tokens, hidden, topk, 4 * world
        self.states = one_gpu.create_all(moe.MoE, world, device=device, tokens=tokens, hidden=hidden, topk=topk,
                                         experts=self.E)
        self.through_ops = through_ops
        self.names = [ops.register(s) for s in self.states] if through_ops else None
        self.inputs = [None] * world
        st = self.states[0]
        self.info = dict(tokens=tokens, hidden=hidden, topk=topk, experts=self.E, blocks=st.blocks,
                         through_ops=through_ops)

    def routing(self, rank, it):
        g = torch.Generator(device=self.device).manual_seed(1000003 * rank + it)
        x = torch.randint(-2, 3, (self.T, self.H), generator=g, device=self.device).to(torch.bfloat16)
        idx = torch.rand((self.T, self.E), generator=g, device=self.device).argsort(1)[:, :self.K].to(torch.int32)
        idx[it % self.T::7, -1] = -1  # some slots routed nowhere
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
        self.info = dict(m=self.m, k=k, n=n, blocks=st.comm_blocks + st.consumers, one_wave=st.one_wave,
                         k_segment=st.k_segment, chunk_rows=st.chunk_rows, tma=st.config.tma)

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
        return {"all_reduce": total, "one_shot": total, "all_gather": x.to(self.dtype),
                "reduce_scatter": total.view(self.world, -1)[rank]}

    def launch(self, rank, it, pause):
        c, name, x = torch.ops.castpile, self.names[rank], self.inputs[rank]
        return {"all_reduce": c.all_reduce(x, name), "one_shot": c.all_reduce(x, name, "one_shot"),
                "all_gather": c.all_gather(x, name), "reduce_scatter": c.reduce_scatter(x, name)}

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
        "all_reduce_two_shot_push": lambda: AllReduce(world, device, variant="two_shot_push", n=(1 << 20) + 40,
                                                      dtype=fp32, push_scratch=True),
        "all_gather": lambda: Gather(world, device, op="all_gather", n=100_000, dtype=bf16),
        "reduce_scatter": lambda: Gather(world, device, op="reduce_scatter", n=world * 50_000, dtype=fp32),
        "rmsnorm_low_latency_residual": lambda: RMSNorm(world, device, rows=16, d=2048, dtype=bf16,
                                                        method="low_latency", residual=True),
        "rmsnorm_one_shot_residual": lambda: RMSNorm(world, device, rows=256, d=2048, dtype=bf16, method="one_shot",
                                                     residual=True),
        "rmsnorm_one_shot": lambda: RMSNorm(world, device, rows=8, d=4096, dtype=fp32, method="one_shot",
                                            residual=False),
        "moe": lambda: MoE(world, device, tokens=128, hidden=1024, topk=2),
        "moe_ops": lambda: MoE(world, device, tokens=64, hidden=512, topk=3, through_ops=True),
        "all_gather_matmul_one_wave": lambda: AllGatherMatmul(world, device, shard_rows=32, k=512, n=256),
        "all_gather_matmul_rows": lambda: AllGatherMatmul(world, device, shard_rows=256, k=1024, n=512),
        "all_gather_matmul_k_segment": lambda: AllGatherMatmul(world, device, shard_rows=64, k=4096, n=2048),
        "matmul_reduce_scatter": lambda: MatmulReduceScatter(world, device, m=world * 128, k=256, n=512),
        "torch_ops": lambda: TorchOps(world, device, n=world * 2048, dtype=bf16),
    }


def wrong_elements(got: torch.Tensor, want: torch.Tensor, tolerance) -> torch.Tensor:
    """Elements of ``got`` that are not ``want`` (exactly, or within ``tolerance``), as a device scalar."""
    if tolerance is None:
        return (got != want).sum()
    rtol, atol = tolerance
    return ((got.float() - want.float()).abs() > atol + rtol * want.float().abs()).sum()


def check_case(case: Case, world: int, iters: int, phased: bool, seed: int) -> dict:
    """``iters`` calls on every rank; wrong elements per result, pads left non-zero, seconds."""
    barrier = threading.Barrier(world)
    stream_of = one_gpu.streams(world, case.device)

    def body(rank):
        rng = random.Random(seed * 131 + rank)
        wrong = {}

        def pause():
            if phased:
                stream_of[rank].synchronize()
                barrier.wait()

        if not phased:
            time.sleep(0.002 * (world - rank))  # the threads start in reverse rank order
        for it in range(iters):
            refs = case.prepare(rank, it)
            pause()
            if not phased:
                roll = rng.random()
                if roll < 0.05:
                    time.sleep(rng.uniform(0, 0.002))  # a sleeping rank
                elif roll < 0.15:
                    torch.cuda._sleep(rng.randrange(1000, 200_000))  # its stream starts late on the GPU
            got = case.launch(rank, it, pause)
            pause()
            for key, want in refs.items():
                count = wrong_elements(got[key], want, case.tolerance)
                wrong[key] = count if key not in wrong else wrong[key] + count
        return {k: int(v) for k, v in wrong.items()}

    for rank in range(world):  # the references' libraries (cuBLAS) start here, not while a peer's kernel waits
        case.prepare(rank, 0)
    torch.cuda.synchronize(case.device)
    start = time.perf_counter()
    per_rank = one_gpu.run(body, world, timeout=CASE_LIMIT_S * 0.7, device=case.device)
    seconds = time.perf_counter() - start
    total = {}
    for counts in per_rank:
        for key, v in counts.items():
            total[key] = total.get(key, 0) + v
    return dict(wrong_elements=total, pads_nonzero_after=int(sum(int(p.count_nonzero()) for p in case.pads())),
                seconds=round(seconds, 2))


def child(world: int, iters: int, only: list[str] | None, phased: bool) -> None:
    """Check every case at ``world`` ranks, printing one JSON line per case as it ends."""
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    if phased:
        gc.disable()  # frees happen where the phases allow them, not inside a call
    for name, make in cases(world, device).items():
        if only and name not in only:
            continue
        print(json.dumps(dict(starting=name)), flush=True)
        faulthandler.dump_traceback_later(CASE_LIMIT_S * 0.6, exit=False)  # every thread's stack, if it hangs
        row = dict(world=world, case=name, iters=iters)
        try:
            case = make()
            row.update(case.info)
            row.update(check_case(case, world, iters, phased, seed=world))
        except Exception as exc:  # recorded and reported: one failing case must not hide the others
            row["error"] = f"{type(exc).__name__}: {str(exc)[-3000:]}"
        faulthandler.cancel_dump_traceback_later()
        print(json.dumps(row), flush=True)
        if row.get("error", "").startswith("RankTimeout"):
            os._exit(3)  # its kernels still spin on the GPU: the next cases run in a new child


_CHILD = None


def failed(row: dict) -> bool:
    """Whether a case's row records an error, a wrong element or a pad left non-zero."""
    return bool(row.get("error") or any(row.get("wrong_elements", {}).values()) or row.get("pads_nonzero_after"))


def _stop(signum, frame):
    """On SIGTERM (a time limit around the whole check), end the running child too."""
    if _CHILD is not None:
        _CHILD.kill()
    sys.exit(2)


def run_child(world: int, iters: int, names: list[str], phased: bool) -> tuple[list[dict], dict | None, str]:
    """Run the cases ``names`` in a child; its rows, the hung case's row (if one passed :data:`CASE_LIMIT_S`), stderr."""
    command = [sys.executable, __file__, "--child", str(world), "--iters", str(iters), "--case-limit",
               str(CASE_LIMIT_S), "--cases", *names]
    command += ["--phased"] if phased else []
    global _CHILD
    proc = _CHILD = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    rows, current, hung = [], None, None
    deadline = time.monotonic() + CASE_LIMIT_S
    while True:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            hung = dict(world=world, case=current, iters=iters, error=f"hung: no result within {CASE_LIMIT_S:g} s")
            proc.kill()
            break
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith("{"):
            row = json.loads(line)
            if "starting" in row:
                current, deadline = row["starting"], time.monotonic() + CASE_LIMIT_S
            else:
                rows.append(row)
                print(f"W={world} {row['case']}: {'FAILED ' + json.dumps(row) if failed(row) else 'ok'} "
                      f"({row.get('seconds', '-')} s)", flush=True)
    proc.wait()
    return rows, hung, proc.stderr.read()[-6000:]


def write(path, result: dict) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(result, indent=1) + "\n")


def main():
    global CASE_LIMIT_S
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worlds", type=int, nargs="+", default=[2, 3, 4, 8])
    parser.add_argument("--iters", type=int, default=1000)
    parser.add_argument("--cases", nargs="*", help="only these cases (default: every one)")
    parser.add_argument("--phased", action="store_true", help="host barriers between inputs, calls and checks")
    parser.add_argument("--case-limit", type=float, default=CASE_LIMIT_S, help="seconds before a case counts as hung")
    parser.add_argument("--out", help="write the results here (JSON)")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    CASE_LIMIT_S = args.case_limit
    if args.child is not None:
        child(args.child, args.iters, args.cases, args.phased)
        return
    signal.signal(signal.SIGTERM, _stop)
    rows, failures, stderr = [], [], {}
    for world in args.worlds:
        names = [n for n in cases(world, None) if not args.cases or n in args.cases]
        while names:  # a hung case costs its child: the cases after it run in a new one
            got, hung, tail = run_child(world, args.iters, names, args.phased)
            if hung:
                print(f"W={world} {hung['case']}: FAILED (hung)", flush=True)
                got.append(hung)
            if hung or len(got) < len(names):
                stderr[f"W{world}:{got[-1]['case'] if got else names[0]}"] = tail
            rows += got
            failures += [row for row in got if failed(row)]
            done = {row["case"] for row in got}
            if not got:
                failures.append(dict(world=world, case=names[0], error="the child ended without a result"))
                done = {names[0]}
            names = [n for n in names if n not in done]
        if args.out:  # after every W: a later W that hangs leaves the earlier results written
            write(args.out, dict(device=torch.cuda.get_device_name(0), torch=torch.__version__, iters=args.iters,
                                 phased=args.phased, command=" ".join(["python", *sys.argv]), rows=rows,
                                 failures=failures, stderr_of_hung=stderr))
    print(f"{len(rows)} rows, {len(failures)} failures")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
