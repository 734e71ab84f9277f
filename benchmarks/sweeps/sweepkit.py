"""What the sweeps share: their import path, their command line, and the all-reduce sweeps' set-up.

A sweep runs from the repository root as ``python benchmarks/sweeps/X.py`` (the two-GPU ones
under torchrun), so ``benchmarks/sweeps/`` is first on ``sys.path`` and ``import sweepkit``
comes before the sweep's other imports: it puts ``benchmarks/`` (``harness``, ``kernels``, the
benchmarks a sweep borrows from) and the repository root (``castpile``) in front of the rest.

The two-GPU all-reduce sweeps (sweep_small, sweep_barrier, sweep_large, sweep_push) take one
bf16 symmetric tensor per message size holding this rank's ``harness.fill_pattern``
(:func:`bf16_case`), time torch symmetric memory's one-shot beside their candidates
(:func:`symm_mem_one_shot`), check every candidate with the ranks in step (:func:`checked`), and
end with rank 0 writing the result file (:func:`finish`).
"""

import argparse
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(BENCH), str(BENCH.parent)]

import torch
import torch.distributed as dist

from castpile.gpu import runtime
from harness import fill_pattern, max_abs_error, pattern_sum, run_header, stop_ranks, write_result


def command_line(doc: str, reps: int, out: str | None = None) -> argparse.ArgumentParser:
    """The sweep's parser: ``--out`` (required unless ``out`` is its default) and ``--reps`` timed rounds."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    if out is None:
        parser.add_argument("--out", required=True)
    else:
        parser.add_argument("--out", default=out)
    parser.add_argument("--reps", type=int, default=reps)
    return parser


def bf16_case(nbytes: int, rank: int, world: int, dev, push_scratch: bool = False):
    """(symmetric tensor of ``nbytes`` of bf16 filled with this rank's pattern, the exact fp32 sum over ranks)."""
    n = nbytes // 2
    symm = runtime.symmetric_empty((n,), torch.bfloat16, push_scratch=push_scratch)
    fill_pattern(symm.tensor, rank)
    return symm, pattern_sum(n, world, dev)


def symm_mem_one_shot(x: torch.Tensor):
    """A call of torch symmetric memory's one-shot all-reduce of ``x`` (a symmetric tensor) over the default group."""
    group_name = dist.group.WORLD.group_name
    return lambda: torch.ops.symm_mem.one_shot_all_reduce(x, "sum", group_name)


def checked(fn, result: torch.Tensor, expect: torch.Tensor, prepare=None, calls: int = 1) -> float:
    """``prepare()`` (if given), then ``calls`` calls of ``fn`` with every rank in step: ``result``'s largest error."""
    if prepare is not None:
        prepare()
    torch.cuda.synchronize()
    dist.barrier()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return max_abs_error(result, expect)


def finish(path, dev, rank: int, **fields):
    """Rank 0 writes the result file (``harness.run_header`` and ``fields``); then every rank leaves the group."""
    if rank == 0:
        write_result(path, run_header(dev, **fields))
    stop_ranks()
