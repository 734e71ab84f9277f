"""Multicast tensors on the NVSHMEM backend: checked against NCCL or torch, timed against NCCL (docs/nvshmem.md).

One launch is one mode; NVSHMEM reads its environment once, at initialisation:

    # (a) P2P allowed: both GPUs of the host reachable by loads and stores
    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
        python3 -m torch.distributed.run --nproc_per_node 2 benchmarks/check_nvshmem.py --out $OUT/nvshmem.json
    # (b) the remote path for the peer: P2P off, a network transport over the host's InfiniBand
    NVSHMEM_DISABLE_P2P=1 NVSHMEM_REMOTE_TRANSPORT=ibgda NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 \\
        NVSHMEM_DISABLE_NVLS=1 python3 -m torch.distributed.run --nproc_per_node 2 benchmarks/check_nvshmem.py \\
        --out $OUT/nvshmem-ibgda.json          # and NVSHMEM_REMOTE_TRANSPORT=ibrc / ucx
    # (b) as far as one NVLink domain allows: P2P on, every peer tagged remote in the kernels' tables, so
    # they reach it through NVSHMEM get, put and quiet (signals are puts after a quiet), over NVSHMEM's P2P transport
    ... benchmarks/check_nvshmem.py --force-remote --out $OUT/nvshmem-forced.json
    # the same on one GPU: two PEs per GPU need CUDA MPS with thread shares adding up to at most 100
    nvidia-cuda-mps-control -d; export CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50
    ... benchmarks/check_nvshmem.py --force-remote --out $OUT/nvshmem-forced.json   # --nproc_per_node 2, one GPU
    # (ranks share it in a gloo group: references are torch's, computed on the rank, and nothing is timed)

Each rank allocates with ``backend="nvshmem"``, records ``reachable`` against the layout's
expectation (``backends.node_reachability``), then per size: ``--iters`` calls of the
all-reduce written with ``remote="nvshmem"`` bindings (benchmarks/kernels/nvshmem_kernels.py,
imported from its checked-in plain-Triton module: this image has no libcst), each on fresh
integer-valued bf16 data compared bit for bit with NCCL's all-reduce of the same input; the
signal pads must end zero; medians of both (benchmarks/harness.py). Where every peer is
reachable, the library's collectives run on the same NVSHMEM tensor and are checked the same
way; where not, their refusal is recorded. Then per size a push all-gather with ``remote=``
bindings (its stores become puts), against torch's stack of every rank's row; per shape of
``FUSED_SHAPES`` the fused all-reduce + residual + RMSNorm spelled with ``remote=`` bindings
and the library's, the residual exact and y within one bf16 rounding of float32 torch.
``mismatches`` counts wrong elements everywhere (residual and y elements in the fused phases).

Nothing is allowed to hang or vanish: every phase runs under try/except with the process's
stdout and stderr (NVSHMEM prints from C) captured into ``<out>.rank<r>.log`` and the phase's
part copied into the JSON; each rank rewrites ``<out>.rank<r>.json`` after every phase, and
rank 0 writes ``<out>`` with both ranks' records at the end; a watchdog (harness.start_ranks)
ends a rank that makes no progress for ``--timeout`` seconds, and no new size starts after
``--budget`` seconds.
"""

import argparse
import contextlib
import json
import os
import sys
import time
import traceback
from pathlib import Path

import torch
import torch.distributed as dist
import triton

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from bench_rmsnorm import EPS, reference as rmsnorm_reference
from castpile.gpu import backends, collectives, runtime
from castpile.gpu.fused import rmsnorm
from harness import run_header, start_ranks, timed

SIZES = [64 << 10, 1 << 20, 16 << 20]  # bytes of each rank's bf16 input
FUSED_SHAPES = [(16, 4096), (256, 8192)]  # rows x D of the fused all-reduce + residual + RMSNorm
SHARED_GPU_TIMING = "skipped: ranks share a GPU (gloo group, no NCCL to time against)"
BLOCK, WARPS = 1024, 4
ENV_PREFIXES = ("NVSHMEM_", "NCCL_", "TORCH_SYMM_MEM_", "CUDA_MPS_", "UCX_", "LOCAL_WORLD_SIZE", "WORLD_SIZE")


class Run:
    """One rank's record: phases in order, each with its status, time, error and captured output."""

    def __init__(self, out: Path, rank: int):
        self.out, self.rank = out, rank
        self.log = Path(f"{out}.rank{rank}.log")
        self.record = {
            "rank": rank,
            "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES)},
            "phases": [],
        }

    @contextlib.contextmanager
    def phase(self, name: str, **fields):
        """Run the body as phase ``name``: its output captured, any exception recorded (and not raised)."""
        entry = {"phase": name, **fields, "status": "running"}
        self.record["phases"].append(entry)
        self.save()
        start = time.perf_counter()
        with self._captured() as captured:
            try:
                yield entry
                entry["status"] = "ok"
            except Exception as exc:  # recorded, never raised: the next phase still runs
                entry["status"] = "failed"
                entry["error"] = f"{type(exc).__name__}: {exc}"
                entry["traceback"] = traceback.format_exc()[-4000:]
        entry["seconds"] = round(time.perf_counter() - start, 3)
        text = captured()
        if text.strip():
            entry["output"] = text[-4000:]
        self.save()

    @contextlib.contextmanager
    def _captured(self):
        """File descriptors 1 and 2 into the log while the body runs; yields a function returning what they got.

        They write into the log file itself, so that what a process that dies inside the body printed
        (NVSHMEM exits from C on a failed initialisation) is still there.
        """
        sys.stdout.flush()
        sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        with open(self.log, "ab") as log:
            start = log.tell()
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
            text = ""
            try:
                yield lambda: text
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os.dup2(saved[0], 1)
                os.dup2(saved[1], 2)
                os.close(saved[0])
                os.close(saved[1])
        with open(self.log, "rb") as log:
            log.seek(start)
            text = log.read().decode(errors="replace")
        sys.stdout.write(text)  # the console still shows it
        sys.stdout.flush()

    def save(self):
        Path(f"{self.out}.rank{self.rank}.json").write_text(json.dumps(self.record, indent=1))

    def failed(self, name: str) -> bool:
        return any(p["phase"] == name and p["status"] != "ok" for p in self.record["phases"])


def pattern(x: torch.Tensor, rank: int, it: int):
    """Integers in [-64, 64], different per rank and call: their sums over 2 ranks are exact in bf16."""
    n = torch.arange(x.numel(), device=x.device)
    x.copy_(((n * (rank + 3) + it * 7919 + rank * 31) % 129 - 64).to(x.dtype))


def check_and_time(name: str, symm, ours, reference, args, dog, entry):
    """``args.iters`` calls of ``ours()`` on fresh data against ``reference(x, call)``; pads zero after; medians of
    both against NCCL where the group is NCCL's."""
    rank, x = symm.rank, torch.empty_like(symm.tensor)
    mismatches = torch.zeros((), dtype=torch.int64, device=x.device)
    for it in range(args.iters):
        pattern(x, rank, it)
        symm.tensor.copy_(x)
        mismatches += (ours() != reference(x, it)).sum()
        if it % 50 == 0:
            dog.tick(f"{name} call {it}")
    torch.cuda.synchronize()
    dist.barrier()
    totals = torch.stack([mismatches, symm.signal_pad.count_nonzero().to(torch.int64)])
    dist.all_reduce(totals)
    entry.update(iters=args.iters, mismatches=int(totals[0]), pads_nonzero_after=int(totals[1]))
    nccl_buf = x.clone()
    time_against_nccl(entry, ours, lambda: dist.all_reduce(nccl_buf), args, dog)


def time_against_nccl(entry, ours, nccl, args, dog):
    """Medians of ``ours`` and ``nccl`` into ``entry`` (``castpile_us``, ``nccl_us``); where ranks share a GPU
    (a gloo group) nothing is timed and ``entry`` says so."""
    if dist.get_backend() != "nccl":
        entry["timing"] = SHARED_GPU_TIMING
        return
    medians = timed({"castpile": ours, "nccl": nccl}, args.timing_iters, args.reps, dog)
    entry.update(castpile_us=round(medians["castpile"], 2), nccl_us=round(medians["nccl"], 2))


def remote_tags(symm) -> list[int]:
    """Each rank's entry in ``symm``'s remote_ptrs table shifted to its tag: 0 where an address, pe + 1 where remote."""
    return [int(e) >> backends.REMOTE_TAG_SHIFT for e in symm.remote_ptrs.tolist()]


def nccl_all_reduce(x, it):
    ref = x.clone()
    dist.all_reduce(ref)
    return ref


def summed_patterns(x, it):
    """Every rank's input of call ``it`` summed by torch on this rank (where there is no NCCL to ask)."""
    total, one = torch.zeros(x.shape, dtype=torch.float32, device=x.device), torch.empty_like(x)
    for r in range(dist.get_world_size()):
        pattern(one, r, it)
        total += one.float()
    return total.to(x.dtype)


def check_and_time_fused(name: str, symm, fused, args, dog, entry):
    """``args.iters`` calls of ``fused(residual, weight, out)`` on fresh integer data: the residual exact, y within
    one bf16 rounding of float32 torch; pads zero after; medians against NCCL all-reduce + add + torch rms_norm."""
    rank, world, (m, d) = symm.rank, symm.world_size, symm.tensor.shape
    dev = symm.tensor.device
    out = torch.empty_like(symm.tensor)
    wrong = torch.zeros(2, dtype=torch.int64, device=dev)
    for it in range(args.iters):
        gens = [torch.Generator(device=dev).manual_seed(1000 * it + r) for r in range(world + 2)]
        xs = [torch.randint(-8, 9, (m, d), generator=g, device=dev).to(torch.bfloat16) for g in gens[:world]]
        residual = torch.randint(-8, 9, (m, d), generator=gens[world], device=dev).to(torch.bfloat16)
        weight = (torch.randint(1, 9, (d,), generator=gens[world + 1], device=dev).float() / 4).to(torch.bfloat16)
        expect_h, expect_y = rmsnorm_reference(sum(x.float() for x in xs), residual, weight)
        symm.tensor.copy_(xs[rank])
        fused(residual, weight, out)
        wrong[0] += (residual != expect_h).sum()
        wrong[1] += ((out.float() - expect_y.float()).abs() > 2**-7 * expect_y.float().abs()).sum()
        if it % 50 == 0:
            dog.tick(f"{name} call {it}")
    torch.cuda.synchronize()
    dist.barrier()
    totals = torch.cat([wrong, symm.signal_pad.count_nonzero().to(torch.int64).view(1)])
    dist.all_reduce(totals)
    entry.update(
        iters=args.iters,
        mismatches=int(totals[0] + totals[1]),
        wrong_residual=int(totals[0]),
        wrong_y=int(totals[1]),
        pads_nonzero_after=int(totals[2]),
    )
    residual, weight = torch.zeros_like(symm.tensor), torch.ones(d, dtype=torch.bfloat16, device=dev)
    nccl_buf = symm.tensor.clone()

    def nccl():
        dist.all_reduce(nccl_buf)
        residual.add_(nccl_buf)
        return torch.nn.functional.rms_norm(residual, (d,), weight, EPS)

    time_against_nccl(entry, lambda: fused(residual, weight, out), nccl, args, dog)


def all_gather_phases(run, args, dog, rank, world, remote_kernels, started):
    """The push all-gather spelled with remote= bindings per size: its stores reach remote peers as NVSHMEM puts.

    Checked against torch's stack of every rank's row (computed on the rank), timed against NCCL's
    ``all_gather_into_tensor`` where the group is NCCL's.
    """
    for nbytes in args.sizes:
        n = nbytes // 2
        if time.monotonic() - started > args.budget:
            run.record["phases"].append({"phase": f"all-gather {nbytes}", "status": "skipped: over --budget"})
            continue
        symm = None
        with run.phase("allocate all-gather", bytes=nbytes) as entry:
            symm = runtime.symmetric_empty(
                (world, n), torch.bfloat16, backend="nvshmem", force_remote=args.force_remote
            )
            entry.update(remote_tags=remote_tags(symm))
        if symm is None:
            return
        dist.barrier()
        with run.phase("remote all-gather", bytes=nbytes) as entry:
            blocks = max(1, min(-(-n // BLOCK), symm.max_blocks))
            entry["blocks"] = blocks

            def gather():
                remote_kernels.all_gather_remote[(blocks,)](
                    symm.tensor,
                    symm.remote_ptrs,
                    symm.signal_pad,
                    symm.signal_pad_remote_ptrs,
                    rank,
                    n,
                    WORLD=world,
                    BLOCK=BLOCK,
                    num_warps=WARPS,
                )

            rows, mismatches = torch.empty((world, n), dtype=torch.bfloat16, device=symm.tensor.device), 0
            for it in range(args.iters):
                for r in range(world):
                    pattern(rows[r], r, it)
                symm.tensor.fill_(float("nan"))
                symm.tensor[rank].copy_(rows[rank])
                gather()
                mismatches += int((symm.tensor.view(torch.int16) != rows.view(torch.int16)).sum())
                if it % 50 == 0:
                    dog.tick(f"all-gather call {it}")
            torch.cuda.synchronize()
            dist.barrier()
            totals = torch.tensor([mismatches, int(symm.signal_pad.count_nonzero())], device=symm.tensor.device)
            dist.all_reduce(totals)
            entry.update(iters=args.iters, mismatches=int(totals[0]), pads_nonzero_after=int(totals[1]))
            gathered = torch.empty_like(symm.tensor)
            time_against_nccl(entry, gather, lambda: dist.all_gather_into_tensor(gathered, rows[rank]), args, dog)
        symm = None
        torch.cuda.synchronize()
        dist.barrier()


def fused_phases(run, args, dog, rank, world, remote_kernels, started):
    """The fused all-reduce + residual + RMSNorm per shape: spelled with remote= bindings, and the library's."""
    for m, d in FUSED_SHAPES:
        if time.monotonic() - started > args.budget:
            run.record["phases"].append({"phase": f"fused {m}x{d}", "status": "skipped: over --budget"})
            continue
        symm = None
        with run.phase("allocate fused", shape=[m, d]) as entry:
            symm = runtime.symmetric_empty((m, d), torch.bfloat16, backend="nvshmem", force_remote=args.force_remote)
            entry.update(reachable=list(symm.reachable), remote_tags=remote_tags(symm))
        if symm is None:
            return
        dist.barrier()
        with run.phase("remote fused rmsnorm", shape=[m, d]) as entry:
            blocks = min(m, symm.max_blocks)
            entry["blocks"] = blocks

            def remote(residual, weight, out):
                remote_kernels.all_reduce_residual_rmsnorm_remote[(blocks,)](
                    symm.tensor,
                    symm.remote_ptrs,
                    symm.signal_pad,
                    symm.signal_pad_remote_ptrs,
                    residual,
                    weight,
                    out,
                    rank,
                    m,
                    d,
                    EPS,
                    WORLD=world,
                    BLOCK=triton.next_power_of_2(d),
                    num_warps=8,
                )
                return out

            check_and_time_fused("castpile_remote_fused", symm, remote, args, dog, entry)
        if symm.all_reachable and not run.failed("remote fused rmsnorm"):
            with run.phase("library fused rmsnorm", shape=[m, d]) as entry:
                check_and_time_fused(
                    "castpile_fused",
                    symm,
                    lambda r, w, o: rmsnorm.all_reduce_residual_rmsnorm(symm, r, w, EPS, o),
                    args,
                    dog,
                    entry,
                )
        symm = None
        torch.cuda.synchronize()
        dist.barrier()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="nvshmem.json")
    parser.add_argument("--sizes", type=int, nargs="+", default=SIZES, help="bytes of each rank's bf16 input")
    parser.add_argument("--iters", type=int, default=200, help="checked calls per kernel and size")
    parser.add_argument("--timing-iters", type=int, default=20)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=90.0, help="watchdog: seconds without progress")
    parser.add_argument("--budget", type=float, default=150.0, help="seconds after which no new size starts")
    parser.add_argument(
        "--force-remote",
        action="store_true",
        help="tag every peer remote in the remote_ptrs tables (runtime.symmetric_empty(force_remote=))",
    )
    args = parser.parse_args()
    started = time.monotonic()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)

    rank, world, dev, dog = start_ranks(args.timeout, share_gpus=True)
    run = Run(out, rank)
    p2p = os.environ.get("NVSHMEM_DISABLE_P2P", "0").lower() in ("", "0", "false", "n", "no")
    mode = (
        ("p2p" if p2p else "no-p2p")
        + ("-forced-remote" if args.force_remote else "")
        + ("" if dist.get_backend() == "nccl" else "-shared-gpu")
    )
    run.record.update(run_header(dev, world_size=world, mode=mode))
    reference = nccl_all_reduce if dist.get_backend() == "nccl" else summed_patterns

    with run.phase("nvshmem available") as entry:
        from torch.distributed import _symmetric_memory as symm_mem

        entry["problem"] = backends.nvshmem_problem(symm_mem, torch.cuda.is_available())
        if entry["problem"]:
            raise RuntimeError(entry["problem"])

    with run.phase("import the remote kernel") as entry:
        # torch's requires_nvshmem (which finds libnvshmem_device.bc) runs at each remote kernel's first launch
        from kernels.generated import nvshmem_kernels_loop as remote_kernels

        entry["module"] = remote_kernels.__file__

    for nbytes in args.sizes:
        n = nbytes // 2
        if time.monotonic() - started > args.budget:
            run.record["phases"].append({"phase": f"size {nbytes}", "status": "skipped: over --budget"})
            continue
        dog.tick(f"allocate {nbytes}")
        symm = None
        with run.phase("allocate", bytes=nbytes) as entry:
            symm = runtime.symmetric_empty((n,), torch.bfloat16, backend="nvshmem", force_remote=args.force_remote)
            expected = backends.node_reachability(symm.pes, rank, backends.local_world_size(world), p2p=p2p)
            entry.update(
                backend=symm.backend,
                pes=list(symm.pes),
                reachable=list(symm.reachable),
                expected_reachable=list(expected),
                as_expected=tuple(symm.reachable) == tuple(expected),
                buffer_ptr_nonzero=[int(p) != 0 for p in symm.buffer_ptrs.tolist()],
                remote_tags=remote_tags(symm),
                max_blocks=symm.max_blocks,
            )
        if symm is None:
            break  # allocation is collective: a failure leaves nothing to run on
        dist.barrier()

        with run.phase("remote all-reduce", bytes=nbytes) as entry:
            out_buf = torch.empty_like(symm.tensor)
            blocks = max(1, min(-(-n // BLOCK), symm.max_blocks))
            entry["blocks"] = blocks

            def ours():
                remote_kernels.all_reduce_remote[(blocks,)](
                    symm.tensor,
                    symm.remote_ptrs,
                    symm.signal_pad,
                    symm.signal_pad_remote_ptrs,
                    out_buf,
                    rank,
                    n,
                    WORLD=world,
                    BLOCK=BLOCK,
                    num_warps=WARPS,
                )
                return out_buf

            check_and_time("castpile_remote", symm, ours, reference, args, dog, entry)

        library = {
            "all_reduce_one_shot": lambda: collectives.all_reduce_one_shot(symm, lib_out),
            "all_reduce_two_shot": lambda: collectives.all_reduce_two_shot(symm, push=False),
            "all_reduce": lambda: collectives.all_reduce(symm, lib_out),
        }
        lib_out = torch.empty_like(symm.tensor)
        for name, call in library.items():
            if run.failed("remote all-reduce") and name != "all_reduce_one_shot":
                continue  # a rank may be wedged: one library call at most, to record the outcome
            with run.phase(f"library {name}", bytes=nbytes) as entry:
                if not symm.all_reachable:
                    try:
                        call()
                    except ValueError as exc:  # the library refuses remote peers before launching
                        entry["refused"] = str(exc)
                        continue
                    raise AssertionError(f"{name} ran on a tensor with remote peers")
                check_and_time(name, symm, call, reference, args, dog, entry)
        dog.tick(f"done {nbytes}")
        symm = None
        torch.cuda.synchronize()
        dist.barrier()

    if not run.failed("import the remote kernel") and time.monotonic() - started < args.budget:
        all_gather_phases(run, args, dog, rank, world, remote_kernels, started)
        fused_phases(run, args, dog, rank, world, remote_kernels, started)

    dog.tick("gather the records")
    records = [None] * world
    try:
        dist.all_gather_object(records, run.record)
    except Exception as exc:
        records = [run.record, {"error": f"all_gather_object failed: {exc}"}]
    if rank == 0:
        checked = [p for r in records if r and "phases" in r for p in r["phases"] if "mismatches" in p]
        ok = bool(checked) and all(p["mismatches"] == 0 and p["pads_nonzero_after"] == 0 for p in checked)
        failed = [
            (r.get("rank"), p["phase"])
            for r in records
            if r and "phases" in r
            for p in r["phases"]
            if p.get("status") == "failed"
        ]
        out.write_text(json.dumps({"all_checks_exact": ok, "failed_phases": failed, "ranks": records}, indent=1))
        print("ALL EXACT" if ok and not failed else f"NOT ALL OK: failed phases {failed}", flush=True)
    try:
        dist.barrier()
        dist.destroy_process_group()
    except Exception:
        pass


if __name__ == "__main__":
    main()
