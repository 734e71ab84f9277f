"""The host side of debug-mode waits, without a GPU: a record filled by hand reads back as HangError's lines, and
addresses in the ranks' tensors are named by rank, tensor and index.

The record's layout is written out here from castpile.gpu.wait_deadlines' docstring (word 0 the count, then entries
of ENTRY_WORDS words: flag, seen, expected, comparison, deadline, program ids, PE, kind, then the site's bytes).
"""

import gc

import pytest
import torch

from castpile.gpu import HangError, allocation_names, wait_deadlines
from castpile.gpu.wait_deadlines import CAPACITY, ENTRY_WORDS, RECORD_WORDS
from castpile.options import debug_waits_from_env


def site_words(site: str) -> list[int]:
    data = site.encode().ljust(8 * (ENTRY_WORDS - 10), b"\0")
    return [int.from_bytes(data[k : k + 8], "little", signed=True) for k in range(0, len(data), 8)]


def record(*entries: list[int], claimed: int | None = None) -> torch.Tensor:
    words = torch.zeros(RECORD_WORDS, dtype=torch.int64)
    words[0] = len(entries) if claimed is None else claimed
    for k, entry in enumerate(entries):
        words[1 + k * ENTRY_WORDS : 1 + k * ENTRY_WORDS + len(entry)] = torch.tensor(entry)
    return words


def entry(flag, seen, expected, comparison, deadline_ns, block, pe, kind, site) -> list[int]:
    return [flag, seen, expected, comparison, deadline_ns, *block, pe, kind, *site_words(site)]


def test_a_record_reads_back_as_the_lines_of_a_hang_error():
    words = record(
        entry(0x7F00_0000_1004, 0, 1, 0, 2_000_000_000, (0, 0, 0), -1, 0, "kernels.py:42"),
        entry(0x7F00_0000_2000, 7, 8, 2, 500_000_000, (3, 1, 0), -1, 1, "/home/u/pkg/kernels.py:9"),
        entry(0x7F00_0000_3000, -1, 4, 5, 1_500_000_000, (1, 0, 2), 1, 0, "k.py:5"),
    )
    entries, unrecorded = wait_deadlines.entries_in(words.tolist())
    names = {0x7F00_0000_1004: "rank 1's signal_pad[1]"}
    error = HangError(entries, unrecorded, names.get)
    assert unrecorded == 0 and [e.block for e in error.entries] == [(0, 0, 0), (3, 1, 0), (1, 0, 2)]
    assert str(error).splitlines()[1:] == [
        "block (0, 0, 0) gave up waiting at kernels.py:42 after 2 s: flag rank 1's signal_pad[1] == 1 expected, saw 0",
        (
            "block (3, 1, 0) gave up signalling (wait_for=) at /home/u/pkg/kernels.py:9 after 0.5 s: "
            "flag at 0x7f0000002000 >= 8 expected, saw 7"
        ),
        "block (1, 0, 2) gave up waiting at k.py:5 after 1.5 s: flag at 0x7f0000003000 on PE 1 < 4 expected, saw -1",
    ]
    assert str(error).startswith("castpile waits gave up (CASTPILE_DEBUG_WAITS)")


def test_waits_past_the_records_capacity_are_counted():
    full = [entry(0x1000 + 4 * k, 0, 1, 0, 10**9, (k, 0, 0), -1, 0, "k.py:3") for k in range(CAPACITY)]
    entries, unrecorded = wait_deadlines.entries_in(record(*full, claimed=CAPACITY + 5).tolist())
    assert len(entries) == CAPACITY and unrecorded == 5
    assert str(HangError(entries, unrecorded)).endswith(f"and 5 more gave up (the record holds {CAPACITY})")


def test_the_helpers_write_sites_and_comparisons_as_the_host_reads_them():
    # the debug helpers' compile-time functions (castpile/compiler/helpers/deadlines.py), run as Python
    from castpile.compiler.helpers import deadlines

    words = ENTRY_WORDS - 10
    for site in ("k.py:7", "/very/long/" * 30 + "kernels.py:42"):
        site_text = [deadlines._castpile_site_word.fn(site, k, words) for k in range(words)]
        [found], _ = wait_deadlines.entries_in(record([1, 0, 1, 0, 10**9, 0, 0, 0, -1, 0, *site_text]).tolist())
        if len(site) <= 8 * words:
            assert found.site == site
        else:
            assert found.site == "..." + site[len(site) - 8 * words + 3 :]
    for index, name in enumerate(wait_deadlines.COMPARISONS):
        assert deadlines._castpile_comparison.fn(name) == index


def test_addresses_in_named_tensors_are_named_by_rank_tensor_and_index():
    pad = torch.zeros(16, dtype=torch.int32)
    slots = torch.zeros((2, 3), dtype=torch.int64)
    allocation_names.name(pad, 1, "signal_pad")
    allocation_names.name(slots, 0, "low_latency.slots")
    assert allocation_names.name_of(pad.data_ptr() + 3 * 4) == "rank 1's signal_pad[3]"
    assert allocation_names.name_of(slots.data_ptr() + 4 * 8) == "rank 0's low_latency.slots[1, 1]"
    assert allocation_names.name_of(pad.data_ptr() + 2) is None  # inside an element
    assert "signal_pad" not in (allocation_names.name_of(pad.data_ptr() + 16 * 4) or "")  # past its end
    address = pad.data_ptr()
    del pad
    gc.collect()
    assert allocation_names.name_of(address) is None  # freed: forgotten


@pytest.mark.parametrize("bad", ["soon", "nan", "inf", "0", "-2", "2s"])
def test_a_bad_value_of_the_variable_is_refused_naming_it(bad):
    with pytest.raises(ValueError, match=f"^CASTPILE_DEBUG_WAITS={bad!r} is not"):
        debug_waits_from_env({"CASTPILE_DEBUG_WAITS": bad})
