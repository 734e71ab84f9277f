"""Debug-mode waits tried as a new user would from the docs: seconds at the edges of what a deadline can hold, sites
that are cut to fit the record, and debug-mode output that says what it is.

A deadline reaches the kernel as an int64 of nanoseconds (``deadline_ns=``) and is written to the record as one: the
seconds must give at least one nanosecond and at most 2**63 - 1.  Expected texts are written here by hand.
"""

import pytest

import castpile
from castpile import cli
from compile_sm90 import Job, compile_for_sm90

SOURCE = b"""\
import triton
import triton.language as tl
import castpile


@triton.jit
def waits(pad):
    castpile.wait(pad)
"""
SIGNAL_ONLY = b"""\
import triton
import castpile


@triton.jit
def signals(pad, pad_ptrs):
    pads = castpile.multicast_like(pad, pad_ptrs[:2])
    castpile.signal(pads[0])
"""
LONGEST_S = (2**63 - 1) // 10**9  # 9223372036 s: the whole seconds an int64 of nanoseconds holds


@pytest.fixture
def src(tmp_path):
    path = tmp_path / "waits.py"
    path.write_bytes(SOURCE)
    return path


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("1e300", f"is more than {LONGEST_S} seconds, the longest deadline a wait can hold"),
        ("1e11", f"is more than {LONGEST_S} seconds, the longest deadline a wait can hold"),
        ("9223372037", f"is more than {LONGEST_S} seconds, the longest deadline a wait can hold"),
        ("1e-12", "is less than a nanosecond, the shortest deadline a wait can hold"),
        ("4e-10", "is less than a nanosecond, the shortest deadline a wait can hold"),
    ],
    ids=["1e300", "1e11", "9223372037", "1e-12", "4e-10"],
)
@pytest.mark.parametrize("given_as", ["option", "variable"])
def test_seconds_a_deadline_cannot_hold_are_a_usage_error_and_nothing_is_written(src, tmp_path, monkeypatch,
                                                                                 capsysbinary, value, problem,
                                                                                 given_as):  # fmt: skip
    out = tmp_path / "out.py"
    if given_as == "option":
        argv, name, example = ["--debug-waits", value], "--debug-waits", "--debug-waits 5"
    else:
        monkeypatch.setenv("CASTPILE_DEBUG_WAITS", value)
        argv, name, example = [], "CASTPILE_DEBUG_WAITS", "CASTPILE_DEBUG_WAITS=5"
    assert cli.main([str(src), "-o", str(out), *argv]) == 2
    err = capsysbinary.readouterr().err.decode()
    assert err == (
        f"castpile: error: {name}={value!r} {problem}: give how long a castpile.wait may spin before it gives up, "
        f"as in {example}\n"
    )
    assert not out.exists()


@pytest.mark.parametrize(
    ("seconds", "problem"),
    [
        (1e300, f"is more than {LONGEST_S} seconds, the longest deadline a wait can hold"),
        (1e10, f"is more than {LONGEST_S} seconds, the longest deadline a wait can hold"),
        (1e-12, "is less than a nanosecond, the shortest deadline a wait can hold"),
        ("3", "is not a number of seconds"),
    ],
    ids=["1e300", "1e10", "1e-12", "a string"],
)
def test_castpile_transpile_refuses_seconds_a_deadline_cannot_hold(seconds, problem):
    with pytest.raises(ValueError) as info:
        castpile.transpile(SOURCE, "waits.py", debug_waits=seconds)
    assert str(info.value).startswith(f"debug_waits={seconds!r} {problem}: give the seconds a castpile.wait may spin")


def test_the_hook_refuses_seconds_a_deadline_cannot_hold(tmp_path, monkeypatch):
    monkeypatch.setenv("CASTPILE_DEBUG_WAITS", "1e300")
    with pytest.raises(ValueError, match=rf"^CASTPILE_DEBUG_WAITS='1e300' is more than {LONGEST_S} seconds"):
        castpile.install_import_hook("hooked", cache_dir=tmp_path / "cache")


def test_the_edges_of_what_a_deadline_holds_transpile_and_compile_for_sm90(tmp_path):
    jobs = []
    for name, seconds, deadline_ns in (("shortest", 1e-9, 1), ("longest", LONGEST_S, LONGEST_S * 10**9)):
        text = castpile.transpile(SOURCE, "waits.py", debug_waits=seconds).decode()
        assert f"_castpile_wait_flags_until(pad, site='waits.py:8', deadline_ns={deadline_ns})" in text
        path = tmp_path / f"{name}.py"
        path.write_text(text)
        jobs.append(Job(path, "waits", {"pad": "*i32"}, name=name))
    results = compile_for_sm90(jobs, tmp_path)
    assert {name: r.error for name, r in results.items() if not r.ok} == {}
    for result in results.values():
        assert "%globaltimer" in result.ptx.read_text()


@pytest.mark.parametrize(
    ("site", "recorded"),
    [
        ("/" + "é" * 100 + "/kk.py:7", "..." + "é" * 82 + "/kk.py:7"),  # 173 bytes of tail: half an é, then 82
        ("/" + "é" * 100 + "/k.py:7", "..." + "é" * 83 + "/k.py:7"),  # 166 bytes of é: cut between two
        ("/p/" + "😀" * 50 + ".py:10", "..." + "😀" * 41 + ".py:10"),  # 167 bytes: three quarters of one, then 41
    ],
    ids=["half an e-acute", "between two", "part of an emoji"],
)
def test_a_site_cut_to_fit_the_record_starts_at_a_whole_character(site, recorded):
    # the debug helpers' compile-time function (castpile/compiler/helpers/deadlines.py), run as Python, and the
    # host's reading of what it wrote (castpile/gpu/wait_deadlines.py)
    from castpile.compiler.helpers import deadlines
    from castpile.gpu import wait_deadlines

    words = wait_deadlines.SITE_WORDS
    assert 8 * words == 176  # so the tails above: 176 bytes, "..." and 173 of the site's last bytes at most
    entry = [1, 0, 1, 0, 10**9, 0, 0, 0, -1, 0] + [
        deadlines._castpile_site_word.fn(site, k, words) for k in range(words)
    ]
    record = [1, *entry, *[0] * (wait_deadlines.RECORD_WORDS - 1 - len(entry))]
    [found], _ = wait_deadlines.entries_in(record)
    assert found.site == recorded


DEBUG_NOTE = (
    "# debug mode (CASTPILE_DEBUG_WAITS): the _until helpers give up at deadline_ns, recording their site; "
    'docs/one-gpu.md, "Hangs that name their line"'
)


def test_debug_mode_output_says_what_it_is_under_its_helpers_header():
    header = "# ---- castpile 0.3.0 helpers: generated, called by the rewritten accesses above ----"
    debug = castpile.transpile(SOURCE, "waits.py", debug_waits=2.0).decode().splitlines()
    assert debug[debug.index(header) + 1] == DEBUG_NOTE
    normal = castpile.transpile(SOURCE, "waits.py").decode().splitlines()
    assert normal[normal.index(header) + 1] == "import triton"
    assert DEBUG_NOTE not in castpile.transpile(SIGNAL_ONLY, "waits.py", debug_waits=2.0).decode()  # nothing spins
