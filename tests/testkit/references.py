"""Inputs and torch references shared by the semantic tests (tests/test_semantics.py, test_remote.py, test_scalar_forms.py)."""

import torch


def buffers(w, n, dtype, seed=0):
    """``w`` buffers of ``n`` small random integers (exact in every dtype), the same for the same ``seed``."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(-50, 50, (n,), generator=g).to(dtype) for _ in range(w)]


def padded_stack(bufs, rows, cols, fill=0):
    """The P + I tensor: buffer j's first ``cols`` elements in row j, ``fill`` elsewhere."""
    out = torch.full((rows, cols), fill, dtype=bufs[0].dtype)
    for j, b in enumerate(bufs):
        m = min(cols, b.numel())
        out[j, :m] = b[:m]
    return out


# What each tl.atomic_<op> leaves in a buffer, from its old value and the operand.
ATOMIC_REFS = {
    "add": lambda old, v: old + v,
    "max": torch.maximum,
    "min": torch.minimum,
    "and": lambda old, v: old & v,
    "or": lambda old, v: old | v,
    "xor": lambda old, v: old ^ v,
    "xchg": lambda old, v: v,
}
