"""Where the one-wave all-gather + GEMM's time goes (256 rows): the library kernel against variants that drop one part.

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
        python3 -m torch.distributed.run --nproc_per_node 2 benchmarks/diag_ag_onewave.py --out $OUT/diag-ag.json

A diagnostic, not a product, made as diag_rs_stores.py makes its variants: lines of the
generated ``castpile/gpu/fused/tp_gemm/all_gather_kernels_triton.py`` replaced (each must be found,
or the script stops), the module loaded from a temporary file, launched with the library
state's buffers.  In ``one_wave_tile`` the senders (the blocks of this rank's tiles) meet
the peers' senders (``barrier``), send a stripe of the shard to every peer (``send``),
raise a flag per reader (``signal``) and multiply; the readers wait for each segment's
flags (``wait``) and multiply.  Variants: ``no_barrier``, ``no_send`` (flags still
raised: the readers multiply stale rows), ``no_flags`` (neither signal nor wait),
``no_comm`` (none of the four: the one-wave GEMM alone).  Variants without the barrier or
the flags may read rows mid-copy: only their time means something.  Beside them: the
library's call, our GEMM alone and cuBLAS on the gathered A.  Times: medians of 7
rounds, slower rank (benchmarks/harness.py), integer data; ``exact``: the output of the
second call equals torch's.
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
import triton

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from bench_tp_gemm import Problem

from castpile.gpu.fused import tp_gemm
from castpile.gpu.fused.tp_gemm import all_gather_kernels_triton as lib
from harness import load_variant, start_ranks, timed, variant_outcomes, write_result

BARRIER = "        barrier(pad, pad_ptrs, rank, WORLD, True)  # every peer's previous call is done with its buffer\n"
SEND = (
    "        send_chunk(a, a_peers, tl.cast(rank, tl.int64) * Ms * K + pid * STRIPE, tl.cast(Ms, tl.int64) * STRIPE,\n"
    "                   length, K, WORLD, COPY_BLOCK, STRIPE)\n"
)
SIGNAL = (
    "            _castpile_signal(peer_flags, 1, None, flags, SENDERS*(j0 + readers), None, 1, "
    "None, readers < SENDERS, base=pid)\n"
)
WAIT = (
    "            _castpile_wait_flags(flags + j * SENDERS + sender, 1, 0, (senders < SEGMENT) & (sender < SENDERS))\n"
)
DROPS = {
    "no_barrier": (BARRIER,),
    "no_send": (SEND,),
    "no_flags": (SIGNAL, WAIT),
    "no_comm": (BARRIER, SEND, SIGNAL, WAIT),
}


def variants(source: str) -> dict:
    """Variant name -> module text: each of ``DROPS``' lines replaced by a ``pass`` at its indentation."""
    for line in (BARRIER, SEND, SIGNAL, WAIT):
        if source.count(line) != 1:
            sys.exit(f"the generated kernel changed; not found once: {line.strip()[:80]}")
    made = {}
    for name, lines in DROPS.items():
        text = source
        for line in lines:
            text = text.replace(line, line[: len(line) - len(line.lstrip())] + "pass\n")
        made[name] = text
    return made


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="diag-ag-onewave.json")
    parser.add_argument("--shapes", nargs="+", default=["256x8192x8192"], help="M x K x N")
    args = parser.parse_args()
    rank, world, dev, dog = start_ranks(200)
    folder = Path(tempfile.mkdtemp())
    modules = {
        name: load_variant(f"ag_variant_{name}", text, folder)
        for name, text in variants(Path(lib.__file__).read_text()).items()
    }
    group = dist.group.WORLD.group_name
    result = {"command": " ".join(sys.argv), "rows": []}
    for shape in args.shapes:
        m, k, n = map(int, shape.split("x"))
        problem = Problem(
            "all_gather_matmul", m, k, n, rank, world, group, tp_gemm.default_config(m, "all_gather_matmul"), {}
        )
        st, cfg = problem.state, problem.state.config
        if not st.one_wave:
            sys.exit(f"{shape}: the library does not take the one-wave kernel here")
        xs, bs = problem.inputs(3, True)
        b = bs[rank]
        st.a_shard.copy_(xs[rank])
        out = torch.empty((m, n), dtype=torch.bfloat16, device=dev)
        gathered = torch.cat(xs)
        product = torch.empty_like(out)
        tp_gemm.all_gather_matmul(st, None, b, out)  # sets Triton's allocator for the TMA descriptors

        def launcher(module):
            def launch():
                module.all_gather_matmul[(st.comm_blocks + st.consumers,)](
                    st.gathered.tensor,
                    st.peers,
                    b,
                    out,
                    st.flags.tensor,
                    st.flag_peers,
                    st.pad.tensor,
                    st.pad.ptrs,
                    rank,
                    st.shard_rows,
                    n,
                    st.chunk_rows,
                    K=k,
                    WORLD=world,
                    COMM_BLOCKS=st.comm_blocks,
                    COPY_BLOCK=st.copy_block,
                    CONSUMERS=triton.next_power_of_2(st.consumers),
                    TMA=cfg.tma,
                    TMA_STORE=cfg.tma and st.shard_rows % cfg.block_m == 0,
                    TMA_A=cfg.tma and st.shard_rows % cfg.block_m == 0,
                    PROXY_FENCE=cfg.tma,
                    K_SEGMENT=st.k_segment,
                    ONE_WAVE=True,
                    STRIPE=st.stripe,
                    SEGMENT=st.segment,
                    **cfg.options(),
                )

            return launch

        fns = {
            "library": lambda: tp_gemm.all_gather_matmul(st, None, b, out),
            "gemm_alone": lambda: tp_gemm.matmul(gathered, b, product, config=cfg),
            "cublas": lambda: torch.matmul(gathered, b, out=product),
        }
        fns.update({name: launcher(module) for name, module in modules.items()})
        reference = gathered @ b
        exact, errors, failed = variant_outcomes(fns, out, reference, untested=("gemm_alone", "cublas"))
        us = timed({name: fn for name, fn in fns.items() if name not in failed}, 200, 7, dog)
        result["rows"].append(dict(M=m, K=k, N=n, state=repr(st), us=us, exact=exact, errors=errors))
        if rank == 0:
            print(json.dumps(result["rows"][-1]), flush=True)
            write_result(args.out, result)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
