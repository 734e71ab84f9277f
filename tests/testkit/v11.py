"""The language v1.1 tests' kernels (tests/kernels_v11.py), transpiled and imported once per strategy, and their inputs
(tests/test_language_v11.py, test_language_v11_names_errors.py)."""

from pathlib import Path

import pytest
import torch

import castpile
from testkit import import_file

KERNELS = Path(__file__).parent.parent / "kernels_v11.py"

HEADER = """\
import triton
import triton.language as tl
from castpile import multicast_like
"""


@pytest.fixture(scope="module", params=castpile.STRATEGIES, name="k")
def v11_kernels(request, tmp_path_factory):
    """The kernels file transpiled under each strategy, imported (a test that takes ``k`` runs once per strategy)."""
    out = tmp_path_factory.mktemp(request.param) / f"kernels_v11_{request.param}.py"
    out.write_bytes(castpile.transpile(KERNELS.read_bytes(), str(KERNELS), strategy=request.param))
    return import_file(out)


def ramps(w, n, dtype=torch.float32):
    """Buffer j holds 1000 * j + arange(n)."""
    return [(torch.arange(n) + 1000 * j).to(dtype) for j in range(w)]
