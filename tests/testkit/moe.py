"""The MoE dispatch's torch reference, shared by tests/test_moe.py and tests/test_torch_ops_moe.py."""

import torch


def reference_dispatch(idx, world, tokens, experts):
    """Per receiving rank: the token ids of each source's region, grouped_rows, counts, offsets and slot positions."""
    local = experts // world
    sent = []  # sent[s][d]: the tokens source s sends to rank d, ascending
    for s in range(world):
        ids = idx[s].long()
        dest = torch.where((ids >= 0) & (ids < experts), ids // local, -1)
        sent.append([(dest == d).any(1).nonzero().flatten() for d in range(world)])
    out = []
    for r in range(world):
        regions = [sent[s][r] for s in range(world)]
        rows, keys, where = [], [], []
        for s, toks in enumerate(regions):
            loc = idx[s].long()[toks] - r * local  # (rows, K) local ids
            loc = torch.where((loc >= 0) & (loc < local), loc, -1)
            p, k = torch.meshgrid(torch.arange(len(toks)), torch.arange(loc.shape[1]), indexing="ij")
            rows.append((s * tokens + p).flatten())
            keys.append(loc.flatten())
            where.append(((s * tokens + p) * loc.shape[1] + k).flatten())
        rows, keys, where = torch.cat(rows), torch.cat(keys), torch.cat(where)
        mine = keys >= 0
        order = torch.sort(keys[mine], stable=True).indices
        counts = torch.bincount(keys[mine], minlength=local)
        slots = torch.full((world * tokens * idx[0].shape[1],), -1, dtype=torch.int64)
        slots[where[mine][order]] = torch.arange(int(mine.sum()))
        out.append(
            {
                "regions": regions,
                "grouped_rows": rows[mine][order],
                "expert_counts": counts,
                "expert_offsets": torch.cat([torch.zeros(1, dtype=torch.int64), counts.cumsum(0)]),
                "slot_positions": slots.view(world, tokens, -1),
            }
        )
    return out
