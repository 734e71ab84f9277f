"""Where the GEMM + reduce-scatter's time goes: the library kernel against variants that change one thing each.

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
        python3 -m torch.distributed.run --nproc_per_node 2 benchmarks/diag_rs_stores.py

A diagnostic, not a product: the variants are made by replacing lines of the
generated ``castpile/gpu/fused/tp_gemm/reduce_scatter_kernels_triton.py`` (each replaced line
must be found, or the script stops), loaded from a temporary file and launched
with the library state's buffers.  ``local_store_nosync``: partial tiles stored
into this rank's own scratch (results wrong; the cost of the kernel's structure
without NVLink traffic); ``remote_store_nosync``: the peers' tiles stored as in the
library, without the per-tile flags; ``no_store_nosync``: no store of the peers'
tiles (the compiler then drops their GEMM too: not comparable); ``tma_remote_store``:
the peer's tile stored through a TMA descriptor made on the peer's address, with
and without flags.  Times: medians of 7 rounds, slower rank (benchmarks/harness.py),
integer data.  ``exact``: the output equals torch's on the second call.
"""

import json
import sys
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from bench_tp_gemm import Problem

from castpile.gpu.fused import tp_gemm
from castpile.gpu.fused.tp_gemm import reduce_scatter_kernels_triton as lib
from harness import load_variant, start_ranks, timed, variant_outcomes

STORE = (
    "            _castpile_store_loop(dest, 1, None, scratch, N*rows[:, None] + cols[None, :], "
    "(slot >= 0) & (slot < dest_shape0) & (rows[:, None] >= 0) & (rows[:, None] < Ms) & (cols[None, :] >= 0) & "
    "(cols[None, :] < N), part.to(out.dtype.element_ty), align=16, base=Ms*N*slot, "
    "site='castpile/gpu/fused/tp_gemm/reduce_scatter_kernels.py:78')\n"
)
WAIT = "        _castpile_wait_flags(flags + slots * T + j, 1, 0, slots < WORLD - 1)\n"
RAISE_PENDING = "                raise_flag(flags, flag_ptrs, owner, slot * T + pending)\n"
RAISE_LAST = "            raise_flag(flags, flag_ptrs, owner, slot * T + pending)\n"
DEST = "dest = _castpile_table_entry(scratch_ptrs, owner)"
TMA_STORE = (
    "            peer = tl.load(scratch_ptrs + owner).to(tl.pointer_type(out.dtype.element_ty))\n"
    "            pd = tl.make_tensor_descriptor(peer + slot * Ms * N, shape=[Ms, N], strides=[N, 1], "
    "block_shape=[BM, BN])\n"
    "            pd.store([r0, c0], part.to(out.dtype.element_ty))\n"
)


def without_sync(text: str) -> str:
    return (
        text.replace(WAIT, "")
        .replace(RAISE_PENDING, "                pass\n")
        .replace(RAISE_LAST, "            pass\n")
    )


def variants(source: str) -> dict:
    for line in (STORE, WAIT, RAISE_PENDING, RAISE_LAST, DEST):
        if line not in source:
            sys.exit(f"the generated kernel changed; not found: {line.strip()[:80]}")
    local = source.replace(DEST, "dest = _castpile_table_entry(scratch_ptrs, rank)")
    return {
        "local_store_nosync": without_sync(local),
        "remote_store_nosync": without_sync(source),
        "no_store_nosync": without_sync(source.replace(STORE, "")),
        "tma_remote_store": source.replace(STORE, TMA_STORE),
        "tma_remote_store_nosync": without_sync(source.replace(STORE, TMA_STORE)),
    }


def main():
    rank, world, dev, dog = start_ranks(200)
    folder = Path(tempfile.mkdtemp())
    modules = {
        name: load_variant(f"rs_variant_{name}", text, folder)
        for name, text in variants(Path(lib.__file__).read_text()).items()
    }
    group = dist.group.WORLD.group_name
    rows = []
    for m, k, n in [(4096, 8192, 8192), (256, 8192, 8192)]:
        config = tp_gemm.default_config(m, "matmul_reduce_scatter")
        problem = Problem("matmul_reduce_scatter", m, k, n, rank, world, group, config, {})
        st, cfg = problem.state, problem.state.config
        xs, bs = problem.inputs(3, True)
        a, b = xs[rank], bs[rank]
        out = torch.empty(problem.out_shape(), dtype=torch.bfloat16, device=dev)

        def launcher(module):
            def launch():
                module.matmul_reduce_scatter[(st.blocks,)](
                    a,
                    b,
                    out,
                    st.scratch.tensor,
                    st.scratch.ptrs,
                    st.flags.tensor,
                    st.flags.ptrs,
                    st.pad.tensor,
                    st.pad.ptrs,
                    rank,
                    problem.ms,
                    n,
                    K=problem.kl,
                    WORLD=world,
                    TMA=cfg.tma,
                    **cfg.options(),
                )

            return launch

        product = torch.empty((m, n), dtype=torch.bfloat16, device=dev)
        fns = {
            "library": lambda: tp_gemm.matmul_reduce_scatter(st, a, b, out),
            "gemm_alone": lambda: tp_gemm.matmul(a, b, product, config=cfg),
        }
        fns.update({name: launcher(module) for name, module in modules.items()})
        ref = problem.reference(xs, bs)
        exact, errors, failed = variant_outcomes(fns, out, ref, untested=("gemm_alone",))
        us = timed({k: v for k, v in fns.items() if k not in failed}, 20 if m > 1000 else 200, 7, dog)
        rows.append(dict(M=m, K=k, N=n, us=us, exact=exact, errors=errors))
        if rank == 0:
            print(json.dumps(rows[-1]), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
