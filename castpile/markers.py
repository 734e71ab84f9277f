"""The names of the castpile language: :class:`Multicast`, :func:`multicast_like`, :func:`signal` and :func:`wait`.

Markers that castpile rewrites away; used in code it has not transpiled, each says how to transpile.
:mod:`castpile` gives them as its own names (``castpile.multicast_like``; their ``__module__`` is
``castpile``), loading this module on first use, so that ``import castpile`` compiles none of it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn, TypeVar, cast

_HOW = (
    "castpile.{name} only has meaning inside a kernel that castpile has transpiled: "
    "run `castpile kernel.py -o kernel_out.py` and import the output, or call "
    "castpile.install_import_hook('your_package') before importing your kernels"
)


class Multicast:
    """A multicast tensor: what :func:`multicast_like` binds, and the annotation of a helper parameter that takes one.

    A multicast tensor is a stack of same-layout buffers, one per address of its pointer tile.
    Subscripting it addresses every buffer at once (a tensor of shape P + I: the tile's padded
    shape, then the indices' broadcast shape); castpile rewrites each subscript into plain Triton.
    In a ``@triton.jit`` function, annotate a parameter ``castpile.Multicast`` to pass a multicast
    tensor to a helper of the same module::

        @triton.jit
        def add_row(bufs: castpile.Multicast, offs, row):
            bufs[offs] += row[None, :]

        @triton.jit
        def kernel(out, dev_ptrs, n, W: tl.constexpr, BLOCK: tl.constexpr):
            bufs = castpile.multicast_like(out, dev_ptrs[:W], shape=(n,))
            offs = tl.arange(0, BLOCK)
            add_row(bufs, offs, tl.load(out + offs, mask=offs < n))

    The class is there for annotations, editors and type checkers: castpile rewrites every use of a
    multicast tensor, and subscripting one in code it has not transpiled says how to transpile.
    """

    def __getitem__(self, index: Any) -> Any:
        """A masked load of every buffer's elements at ``index`` (shape P + I)."""
        raise _untranspiled("Multicast")

    def __setitem__(self, index: Any, value: Any) -> None:
        """A masked store of ``value``, broadcast to P + I, into every buffer's elements at ``index``."""
        raise _untranspiled("Multicast")


def _untranspiled(name: str) -> RuntimeError:
    """The error of a castpile name used in code that castpile has not transpiled."""
    return RuntimeError(_HOW.format(name=name))


class _Marker:
    """A source-level marker that castpile rewrites away; used without transpiling, it says how to transpile.

    It wraps a function that gives the marker its signature and docstring (for ``help``,
    ``inspect.signature``, editors and type checkers).  Calling the marker raises the how-to
    error whatever the arguments; so does reading its ``__triton_builtin__``, which Triton
    reads from every global an ``@triton.jit`` function references before it compiles the
    function (the JIT's dependency scan, then the code generator's name lookup).  So a
    compiled kernel that was not transpiled reports the how-to message even where an
    argument, evaluated before the call, could not compile (``dev_ptrs[:WORLD]``).  The
    interpreter evaluates that argument first: :mod:`castpile.interpreter_hint` turns its error into this one.
    """

    def __init__(self, function: Callable[..., Any]):
        self.__name__: str = function.__name__
        self.__qualname__ = function.__qualname__
        self.__module__ = function.__module__
        self.__doc__ = function.__doc__
        self.__wrapped__ = function  # what inspect.signature reads

    def __get__(self, instance: object, owner: type | None = None) -> _Marker:
        """As a builtin function's: no binding (and so ``help`` documents the marker as a function)."""
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise _untranspiled(self.__name__)

    @property
    def __triton_builtin__(self) -> NoReturn:
        raise _untranspiled(self.__name__)

    def __repr__(self) -> str:
        return f"<castpile marker {self.__name__}>"


_Function = TypeVar("_Function", bound=Callable[..., Any])


def _marker(function: _Function) -> _Function:
    """``function`` as a :class:`_Marker`, a name of :mod:`castpile`; type checkers see ``function`` itself."""
    function.__module__ = "castpile"
    return cast(_Function, _Marker(function))


@_marker
def multicast_like(
    example: Any,
    ptr_tile: Any,
    shape: tuple[Any, ...] | None = None,
    strides: tuple[Any, ...] | None = None,
    ptr_mask: Any = None,
    align: int | None = None,
    remote: str | None = None,
) -> Multicast:
    """Bind a multicast tensor: the buffers at the addresses of ``ptr_tile``, each laid out like ``example``.

    ``example`` is a pointer whose element type the buffers have (or that type, ``tl.bfloat16``);
    ``ptr_tile`` a slice ``table[lo:hi]`` of a pointer to int64 addresses (``lo``, ``hi``
    constexpr), one entry ``table[r]``, or any Triton tensor of addresses.  ``shape`` and
    ``strides`` are tuple literals of per-buffer extents and strides (accesses are masked to
    ``shape``; strides default to row-major); ``ptr_mask`` marks a tensor tile's valid entries;
    ``align`` promises that every buffer's base address is a multiple of that many bytes;
    ``remote="nvshmem"`` reaches the buffers of other nodes with NVSHMEM.  See docs/language.md::

        @triton.jit
        def allreduce(out, dev_ptrs, n, WORLD: tl.constexpr, BLOCK: tl.constexpr):
            bufs = castpile.multicast_like(out, dev_ptrs[:WORLD], shape=(n,))
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(out + offs, tl.sum(bufs[offs], axis=0), mask=offs < n)  # (WORLD, BLOCK) -> (BLOCK,)

    Only has meaning in a kernel that castpile has transpiled; called otherwise, it raises a
    ``RuntimeError`` that says how to transpile.
    """
    raise _untranspiled("multicast_like")


@_marker
def signal(
    ptrs: Any,
    value: Any = 1,
    wait_for: Any = None,
    sem: str = "release",
    scope: str = "sys",
    mask: Any = None,
    op: str = "set",
) -> None:
    """Set every flag that the multicast access (or plain Triton pointer, since v1.3) ``ptrs`` addresses to ``value``.

    An atomic exchange per flag; with ``wait_for``, a compare-and-swap ``wait_for`` -> ``value``
    retried until it succeeds, so back-to-back barriers lose no signal.  ``op="add"`` adds
    ``value`` atomically instead (not with ``wait_for``).  ``sem`` and ``scope`` are Triton's
    atomic orderings (the writes before the signal are visible to whoever sees the flag);
    ``mask`` turns lanes off.  See docs/language.md::

        flags = castpile.multicast_like(pad, pad_ptrs[:WORLD], shape=(WORLD,))
        tl.debug_barrier()
        castpile.signal(flags[rank], wait_for=0)       # each peer's slot for this rank: 0 -> 1
        castpile.wait(pad + tl.arange(0, WORLD))       # every peer's signal here, reset to 0

    Only has meaning in a kernel that castpile has transpiled; called otherwise, it raises a
    ``RuntimeError`` that says how to transpile.
    """
    raise _untranspiled("signal")


@_marker
def wait(
    ptrs: Any,
    value: Any = 1,
    cmp: str = "eq",
    sem: str = "acquire",
    scope: str = "sys",
    reset: Any = 0,
    mask: Any = None,
    decrement: bool = False,
) -> Any:
    """Spin until every flag at ``ptrs`` compares ``cmp`` to ``value``, then set it to ``reset``; the values seen.

    ``ptrs`` is a multicast access or a plain Triton pointer (tensor or scalar); ``cmp`` one of
    ``"eq" "ne" "ge" "gt" "le" "lt"``; ``reset=None`` leaves the flags as they are (epoch-valued
    flags); ``decrement=True`` is a counting semaphore: wait until each flag is ``>= value``, then
    take ``value`` from it.  Lanes that saw their flag stop touching it; ``mask`` turns lanes off.
    Returns the flags' values that satisfied the wait (shape P + I for an access).  See
    docs/language.md::

        castpile.wait(pad + tl.arange(0, WORLD))                   # every flag 1, then reset to 0
        castpile.wait(epoch_ptr, value=step, cmp="ge", reset=None)  # a monotonic counter
        castpile.wait(sem_ptr, value=1, decrement=True)            # take one count

    Only has meaning in a kernel that castpile has transpiled; called otherwise, it raises a
    ``RuntimeError`` that says how to transpile.
    """
    raise _untranspiled("wait")


Multicast.__module__ = "castpile"  # castpile.Multicast, where help, pickle and type checkers find it
