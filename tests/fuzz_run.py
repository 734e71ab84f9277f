"""A fuzz :class:`~fuzz_model.Case` transpiled, run in the Triton interpreter on host tensors (their
``data_ptr()``s stand in for GPUs) and checked against the model.

A ``wait``, or a ``signal`` with ``wait_for``, runs in a forked process under a timeout,
so that a wait on the wrong flags fails instead of hanging.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import torch

import castpile
from castpile.gpu import sim
from fuzz_model import Case, expected, make_data
from fuzz_source import keyword_constexprs, source
from testkit import import_file

WAIT_TIMEOUT = 30.0  # seconds: a wait that returns takes well under one


def transpiled(case: Case, strategy: str) -> bytes:
    return castpile.transpile(source(case).encode(), "fuzz_case.py", strategy=strategy)


def load_kernel(text: bytes, directory: Path):
    """Import transpiled source from a real file (Triton reads kernels from their file)."""
    name = "fuzz_" + hashlib.sha256(text).hexdigest()[:16]
    path = directory / f"{name}.py"
    if not path.exists():
        path.write_bytes(text)
    return import_file(path, name).kernel


def run(case: Case, strategy: str, directory: Path) -> tuple[dict, bytes]:
    """Transpile ``case`` with ``strategy`` and run it on fresh data; the data afterwards and the output."""
    out = transpiled(case, strategy)
    kernel = load_kernel(out, directory)
    data = make_data(case)
    before = {k: ([b.clone() for b in v] if isinstance(v, list) else v.clone()) for k, v in data.items()}
    shape = list(case.shape or ()) + [1] * 3
    scalars = [i.value if i.is_scalar else 0 for i in case.indices] + [0] * 3
    strides = list(case.strides) + [0] * 3
    names = ("example", "table", "res", "resi", "vals", "mk", "pm", "ctr")

    def launch(rank=0):
        kernel[(1,)](
            *(data[name] for name in names),
            *shape[:3],
            *scalars[:3],
            *strides[:3],
            case.rank,
            int(case.mask_on),
            case.lo,
            case.rank,
            case.mask_on,
            **keyword_constexprs(case),
        )
        return data

    if (
        case.context == "wait" or case.wait_for is not None
    ):  # one forked rank: it sees the same addresses, and a hang is reported
        [after] = sim.run(launch, 1, timeout=WAIT_TIMEOUT)
    else:
        after = launch()
    return {"before": before, "after": after}, out


def check(case: Case, strategy: str, directory: Path) -> bytes:
    """Run ``case`` and assert the result matches the model (raises AssertionError with the source); the output."""
    ran, out = run(case, strategy, directory)
    before, after = ran["before"], ran["after"]
    want = expected(case, before)
    where = f"strategy={strategy}\n--- source ---\n{source(case)}"
    for b, (got, model) in enumerate(zip(after["bufs"], want.bufs)):
        raced = torch.zeros_like(got, dtype=torch.bool)
        for element, admissible in want.choices[b].items():
            assert got[element].item() in admissible, (
                f"buffer {b} element {element}: got {got[element].item()}, racing lanes store one of {sorted(admissible)}\n{where}"
            )
            raced[element] = True
        assert torch.equal(got[~raced], model[~raced]), (
            f"buffer {b} differs: got {got.tolist()} want {model.tolist()}\n{where}"
        )
    assert torch.equal(after["poison"], before["poison"]), f"a masked/padded stack entry was written\n{where}"
    assert torch.equal(after["table"], before["table"]), f"the table of addresses was written\n{where}"
    got = after["res"]
    assert torch.equal(got[want.defined], want.res[want.defined]), (
        f"result differs:\ngot  {got.reshape(case.result_shape).tolist()}\nwant {want.res.reshape(case.result_shape).tolist()}\n{where}"
    )
    if want.indices is not None:
        got_indices = after["resi"].tolist()
        wrong = [(lane, i, sorted(a)) for lane, (i, a) in enumerate(zip(got_indices, want.indices)) if a and i not in a]
        assert not wrong, f"return_indices: (lane, got, admissible) {wrong}\n{where}"
    assert after["ctr"].item() == want.ctr, (
        f"{want.ctr} effects should have run once each, the counter is {after['ctr'].item()}\n{where}"
    )
    return out
