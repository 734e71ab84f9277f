"""The access log of one simulated rank: every load, store and atomic on symmetric memory, for :mod:`.races`.

Installed in a forked rank (:func:`install`), it wraps the Triton interpreter's memory operations and
its launches, and watches the body's torch ops between launches through a ``TorchDispatchMode``.  An
access to a byte of a symmetric allocation (``regions``: ``(start, nbytes)`` pairs) is logged with a
number from a counter all ranks share; an atomic runs under the lock that hands the numbers out, so
the numbers order every flag's values as the ranks saw them.  Records, written to ``path`` as pickled
batches::

    ("launch", seq, kernel name)                 a launch starts on this rank
    ("end", seq)                                 it ended
    ("access", seq, program, kind, site, sem, scope, atomic, reads, writes, addresses, itemsize)
    ("host", seq, kind, site, reads, writes, addresses, itemsize)

``program`` is the ``program_id`` triple; ``addresses`` the first bytes of the elements touched (masked-
off lanes left out); ``writes`` a bool per address (an atomic writes where it changed the value) or a
bool for all; ``site`` the user's ``path:line (function)``.  Consecutive polls that read the same
addresses and change nothing are logged once, with the number of the last.
"""

from __future__ import annotations

import pickle
import sys
import types

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import hang_sites

#: The kinds of access that castpile's helpers make, by the prefix of the helper's name.
_HELPER_KINDS = (
    ("_castpile_signal", "castpile.signal"),
    ("_castpile_wait", "castpile.wait"),
    ("_castpile_arrive", "castpile.wait"),
)
#: Records buffered before a batch is written.
_BATCH = 256


def _enum_name(value) -> str:
    return getattr(value, "name", str(value)).rsplit(".", 1)[-1]


#: Triton's memory semantics and scopes, as castpile's keywords spell them.
_SEMANTICS = {"RELAXED": "relaxed", "ACQUIRE": "acquire", "RELEASE": "release", "ACQUIRE_RELEASE": "acq_rel"}
_SCOPES = {"CTA": "cta", "GPU": "gpu", "SYSTEM": "sys"}


class Recorder:
    """One rank's log (see the module's docstring); :meth:`close` writes what is buffered."""

    def __init__(self, path: str, regions: list[tuple[int, int]], lock, counter: np.ndarray):
        ordered = sorted(regions)
        self._starts = np.array([s for s, _ in ordered], dtype=np.uint64)
        self._ends = np.array([s + n for s, n in ordered], dtype=np.uint64)
        self._out = open(path, "wb")  # noqa: SIM115 - open for the life of the rank
        self._lock = lock
        self._counter = counter
        self._batch: list[tuple] = []
        self._pending: tuple | None = None  # a poll that may repeat
        self._library = hang_sites.library_dirs()
        self.in_launch = False

    def _seq(self) -> int:
        self._counter[0] += 1
        return int(self._counter[0])

    def numbered(self, operation):
        """``(seq, operation())`` with ``operation`` run under the shared lock."""
        with self._lock:
            return self._seq(), operation()

    def lanes(self, addresses, mask) -> tuple[np.ndarray, np.ndarray]:
        """``addresses`` flattened, and which of them are live (``mask``; None: all) and in a symmetric allocation."""
        flat = np.asarray(addresses, dtype=np.uint64).ravel()
        inside = np.ones(flat.shape, dtype=bool)
        if mask is not None:
            inside = np.broadcast_to(np.asarray(mask, dtype=bool), np.shape(addresses)).ravel().copy()
        if not self._starts.size:
            return flat, inside & False
        at = np.searchsorted(self._starts, flat, side="right") - 1
        return flat, inside & (at >= 0) & (flat < self._ends[np.maximum(at, 0)])

    def site(self) -> tuple[str, str]:
        """``(kind of castpile call or "", "path:line (function)")`` of the user's frame that made this access."""
        frame = sys._getframe(2)
        kind = ""
        walker: types.FrameType | None = frame
        while walker is not None:
            name = walker.f_code.co_name
            for prefix, words in _HELPER_KINDS:
                if name.startswith(prefix):
                    kind = words
            walker = walker.f_back
        user = hang_sites.user_frame(frame, self._library, skip=__file__)
        if user is None:
            return kind, "(library code)"
        return kind, f"{hang_sites.frame_path(user)}:{user.f_lineno} ({user.f_code.co_name})"

    def record(self, entry: tuple, poll: bool = False) -> None:
        """Log ``entry``; a ``poll`` equal to the last one but for its number replaces it."""
        pending = self._pending
        if pending is not None:
            if poll and _same_poll(pending, entry):
                self._pending = entry
                return
            self._batch.append(pending)
            self._pending = None
        if poll:
            self._pending = entry
        else:
            self._batch.append(entry)
        if len(self._batch) >= _BATCH:
            self._flush()

    def _flush(self) -> None:
        if self._batch:
            pickle.dump(self._batch, self._out, protocol=pickle.HIGHEST_PROTOCOL)
            self._batch = []

    def launch(self, name: str) -> None:
        self.record(("launch", self.numbered(lambda: None)[0], name))

    def end(self) -> None:
        self.record(("end", self.numbered(lambda: None)[0]))

    def close(self) -> None:
        if self._pending is not None:
            self._batch.append(self._pending)
            self._pending = None
        self._flush()
        self._out.close()


def _same_poll(first: tuple, second: tuple) -> bool:
    """Whether two access records are the same poll (all but their numbers equal)."""
    return first[2:9] == second[2:9] and all(np.array_equal(a, b) for a, b in zip(first[9:], second[9:]))


def _program(builder) -> tuple[int, int, int]:
    x, y, z = builder.grid_idx
    return int(x), int(y), int(z)


def _itemsize(handle) -> int:
    return max(1, handle.get_element_ty().primitive_bitwidth // 8)


def _interpreter_hooks(recorder: Recorder) -> None:
    """Wrap the interpreter's loads, stores, atomics and launches so that they log to ``recorder``."""
    from triton.runtime import interpreter

    builder_cls = interpreter.InterpreterBuilder
    load, store = builder_cls.create_masked_load, builder_cls.create_masked_store
    rmw, cas = builder_cls.create_atomic_rmw, builder_cls.create_atomic_cas
    call = interpreter.GridExecutor.__call__

    def masked_load(self, ptrs, mask, *rest, **options):
        flat, inside = recorder.lanes(ptrs.data, mask.data)
        lanes = flat[inside]
        if not lanes.size:
            return load(self, ptrs, mask, *rest, **options)
        volatile = bool(options.get("is_volatile", rest[-1] if rest else False))
        kind, site = recorder.site()
        seq, out = recorder.numbered(lambda: load(self, ptrs, mask, *rest, **options))
        entry = (
            "access",
            seq,
            _program(self),
            kind or ("volatile load" if volatile else "load"),
            site,
            "",
            "",
            False,
            True,
            False,
            lanes,
            _itemsize(ptrs),
        )
        recorder.record(entry, poll=volatile)
        return out

    def masked_store(self, ptrs, value, mask, *rest, **options):
        flat, inside = recorder.lanes(ptrs.data, mask.data)
        lanes = flat[inside]
        if not lanes.size:
            return store(self, ptrs, value, mask, *rest, **options)
        kind, site = recorder.site()
        seq = recorder.numbered(lambda: None)[0]
        recorder.record(
            ("access", seq, _program(self), kind or "store", site, "", "", False, False, True, lanes, _itemsize(ptrs))
        )
        return store(self, ptrs, value, mask, *rest, **options)

    def atomic(self, name, ptrs, mask, sem, scope, operation):
        shape = np.shape(ptrs.data)
        flat, inside = recorder.lanes(ptrs.data, None if mask is None else mask.data)
        if not inside.any():
            return operation()
        kind, site = recorder.site()
        numpy_type = interpreter._get_np_dtype(ptrs.get_element_ty())
        live = np.ones(shape, dtype=bool) if mask is None else np.broadcast_to(np.asarray(mask.data, bool), shape)

        def run():
            old = operation()
            after = np.asarray(ptrs.data, dtype=np.uint64)
            return old, interpreter._interpreter.load(after, live, np.zeros(shape, numpy_type), numpy_type)

        seq, (old, new) = recorder.numbered(run)
        before = np.ascontiguousarray(np.asarray(old.data, dtype=numpy_type)).reshape(-1).view(np.uint8)
        after = np.ascontiguousarray(np.asarray(new, dtype=numpy_type)).reshape(-1).view(np.uint8)
        changed = (before.reshape(flat.size, -1) != after.reshape(flat.size, -1)).any(axis=1)[inside]
        entry = (
            "access",
            seq,
            _program(self),
            kind or name,
            site,
            _SEMANTICS.get(_enum_name(sem), "acq_rel"),
            _SCOPES.get(_enum_name(scope), "gpu"),
            True,
            True,
            changed,
            flat[inside],
            _itemsize(ptrs),
        )
        recorder.record(entry, poll=not changed.any())
        return old

    def atomic_rmw(self, rmw_op, ptr, val, mask, sem, scope):
        name = "atomic_" + _enum_name(rmw_op).lower().removeprefix("f").removeprefix("u")
        return atomic(self, name, ptr, mask, sem, scope, lambda: rmw(self, rmw_op, ptr, val, mask, sem, scope))

    def atomic_cas(self, ptr, cmp_, val, sem, scope):
        return atomic(self, "atomic_cas", ptr, None, sem, scope, lambda: cas(self, ptr, cmp_, val, sem, scope))

    def launch(self, *args, **kwargs):
        recorder.launch(getattr(self.fn, "__name__", "kernel"))
        recorder.in_launch = True
        try:
            return call(self, *args, **kwargs)
        finally:
            recorder.in_launch = False
            recorder.end()

    builder_cls.create_masked_load = masked_load
    builder_cls.create_masked_store = masked_store
    builder_cls.create_atomic_rmw = atomic_rmw
    builder_cls.create_atomic_cas = atomic_cas
    interpreter.GridExecutor.__call__ = launch


def _element_addresses(tensor: torch.Tensor) -> np.ndarray:
    """The address of every element of ``tensor`` (a CPU tensor of any strides)."""
    offsets = np.zeros((), dtype=np.int64)
    for size, stride in zip(tensor.shape, tensor.stride()):
        offsets = np.add.outer(offsets, np.arange(size, dtype=np.int64) * stride)
    return (tensor.data_ptr() + offsets.ravel() * tensor.element_size()).astype(np.uint64)


def _addresses_of(value) -> np.ndarray | None:
    """The element addresses of ``value`` if it is a CPU tensor with memory of its own (not a fake, functional or
    symbolic-shaped tensor of torch.compile's tracing), else None."""
    if not isinstance(value, torch.Tensor) or value.device.type != "cpu" or value.layout != torch.strided:
        return None
    try:
        return _element_addresses(value) if value.numel() else None
    except (RuntimeError, NotImplementedError, TypeError):
        return None


class HostAccesses(TorchDispatchMode):
    """Logs the body's torch ops that read or write symmetric memory between launches.

    An infrastructure mode, as torch calls it, so that torch.compile still compiles under it (the code it
    generates runs without the dispatcher, and those ops go unrecorded).
    """

    #: Higher-order operators (torch.compile's ``auto_functionalized``) pass through as they are: their own ops
    #: come through this mode again when they run.
    supports_higher_order_operators = True

    @classmethod
    def is_infra_mode(cls) -> bool:
        return True

    def __init__(self, recorder: Recorder):
        super().__init__()
        self._recorder = recorder

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        recorder = self._recorder
        if recorder.in_launch:
            return func(*args, **kwargs)
        touched = []
        schema = getattr(func, "_schema", None)
        arguments = list(schema.arguments) if schema is not None else []
        values = [*args, *(kwargs.get(a.name) for a in arguments[len(args) :])]
        for argument, value in zip(arguments, values):
            written = argument.alias_info is not None and argument.alias_info.is_write
            for tensor in value if isinstance(value, (list, tuple)) else (value,):
                addresses = _addresses_of(tensor)
                if addresses is not None:
                    flat, inside = recorder.lanes(addresses, None)
                    lanes = flat[inside]
                    if lanes.size:
                        touched.append((written, lanes, tensor.element_size()))
        if not touched:
            return func(*args, **kwargs)
        _, site = recorder.site()
        kind = "host " + func.__name__.split(".")[0]
        for written, lanes, size in sorted(touched, key=lambda t: t[0]):  # reads first, then writes
            seq = recorder.numbered(lambda: None)[0]
            recorder.record(("host", seq, kind, site, not written, written, lanes, size))
        return func(*args, **kwargs)


def preload() -> None:
    """Import what :func:`install` needs, in the parent before the fork, so that no rank spends its time importing:
    the interpreter, and what torch imports the first time an op passes through a dispatch mode (about 900
    modules, sympy's among them)."""
    import types

    import triton.runtime.interpreter  # noqa: F401

    with HostAccesses(types.SimpleNamespace(in_launch=True)):  # type: ignore[arg-type]
        torch.zeros(1).add_(0)


def install(path: str, regions: list[tuple[int, int]], lock, counter: np.ndarray) -> tuple[Recorder, HostAccesses]:
    """Log this (forked) rank's accesses to ``path``; enter the returned mode around the body, then close."""
    recorder = Recorder(path, regions, lock, counter)
    _interpreter_hooks(recorder)
    return recorder, HostAccesses(recorder)
