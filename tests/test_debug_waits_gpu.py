"""On a GPU: a barrier whose peer never comes raises HangError naming the kernel file's lines, and the next call works.

The check is benchmarks/debug_waits_proof.py (what the GPU machines run), in a child without ``TRITON_INTERPRET``:
its kernels are the checked-in generated/hang_kernels_debug_waits.py, transpiled with CASTPILE_DEBUG_WAITS=2.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_barrier_without_its_peer_names_its_lines_and_the_gpu_goes_on(tmp_path):
    out = tmp_path / "proof.json"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    child = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "debug_waits_proof.py"), "--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.exists(), child.stdout[-3000:] + child.stderr[-3000:]
    result = json.loads(out.read_text())
    lines = (ROOT / "benchmarks" / "kernels" / "hang_kernels.py").read_text().splitlines()
    wait = 1 + lines.index("    castpile.wait(pad + tl.arange(0, W))")
    signal = 1 + lines.index("    castpile.signal(pads[rank], wait_for=0)")
    assert result["hang"]["raised"] == "HangError"
    assert result["hang"]["entries"] == [
        (
            f"block (0, 0, 0) gave up waiting at benchmarks/kernels/hang_kernels.py:{wait} after 2 s: "
            "flag rank 0's signal_pad[1] == 1 expected, saw 0"
        ),
        (
            f"block (0, 0, 0) gave up signalling (wait_for=) at benchmarks/kernels/hang_kernels.py:{signal} after 2 s: "
            "flag rank 1's signal_pad[0] == 0 expected, saw 1"
        ),
        (
            f"block (0, 0, 0) gave up waiting at benchmarks/kernels/hang_kernels.py:{wait} after 2 s: "
            "flag rank 0's signal_pad[1] == 1 expected, saw 0"
        ),
    ]
    assert result["next_call"]["exact"] and result["next_call"]["pads_zero"]
    assert child.returncode == 0, child.stderr[-3000:]
