"""How much the low-latency all-reduce's publishing costs as a relaxed atomic exchange against a plain store (one GPU).

    python benchmarks/probe_ll_publish.py --out docs/data/probe-ll-publish.json

A kernel writes ``words`` int64 epoch-tagged words, the way ``low_latency_all_reduce`` publishes one rank's row
into a peer's scratch, with ``tl.store`` or with ``tl.atomic_xchg(..., sem="relaxed", scope="sys")`` (what the
library does since the race checker named the store, docs/races.md); medians of CUDA-event timings over
``--iters`` launches, both in the same run, alternated.
"""

import argparse
import json
import statistics

import torch
import triton
import triton.language as tl


@triton.jit
def publish(dst, src, epoch, m, ATOMIC: tl.constexpr, BLOCK: tl.constexpr):
    tile = tl.program_id(0)
    while tile < tl.cdiv(m, BLOCK):
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        word = (tl.cast(epoch, tl.int64) << 32) | tl.load(src + offs, mask=offs < m).to(tl.uint32).to(tl.int64)
        if ATOMIC:
            tl.atomic_xchg(dst + offs, word, mask=offs < m, sem="relaxed", scope="sys")
        else:
            tl.store(dst + offs, word, mask=offs < m)
        tile += tl.num_programs(0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--out")
    args = parser.parse_args()
    rows = []
    for words in (1024, 8192, 65536):
        src = torch.randint(0, 1 << 30, (words,), dtype=torch.int32, device="cuda")
        dst = torch.zeros(words, dtype=torch.int64, device="cuda")
        times = {False: [], True: []}
        for atomic in (False, True):
            publish[(4,)](dst, src, 1, words, atomic, 1024)
        torch.cuda.synchronize()
        for i in range(args.iters):
            for atomic in (False, True):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                publish[(4,)](dst, src, i + 2, words, atomic, 1024)
                end.record()
                end.synchronize()
                times[atomic].append(start.elapsed_time(end) * 1000)
        expected = (torch.tensor(args.iters + 1, dtype=torch.int64) << 32) | src.to(torch.int64).cpu()
        exact = torch.equal(dst.cpu(), expected)
        store, xchg = statistics.median(times[False]), statistics.median(times[True])
        rows.append({"words": words, "store_us": store, "atomic_xchg_us": xchg, "ratio": xchg / store, "exact": exact})
        print(rows[-1], flush=True)
    report = {
        "command": f"python benchmarks/probe_ll_publish.py --iters {args.iters}",
        "device": torch.cuda.get_device_name(),
        "rows": rows,
    }
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
