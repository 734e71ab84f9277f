"""The collectives as torch custom ops (``torch.ops.castpile.*``), and :func:`kernel_op` for your own kernels.

A torch op's arguments are tensors, strings and numbers; a
:class:`~castpile.gpu.symmetric.SymmetricTensor` (peer addresses, signal pads,
scratch) is none of these.  So a symmetric tensor is registered once under a
name, and the ops take that name, as torch's own
``symm_mem::one_shot_all_reduce(Tensor input, str reduce_op, str group_name)``
finds its state from a group name::

    symm = runtime.symmetric_empty((n,), torch.bfloat16)     # collective, every rank
    name = ops.register(symm)                                # "symm0_w2": the same on every rank

    @torch.compile(mode="reduce-overhead", fullgraph=True)
    def f(x):
        return torch.ops.castpile.all_reduce(x * 2, name)   # x * 2 is copied into symm.tensor first

``input`` is the rank's local data.  When it is the symmetric buffer itself
(``symm.tensor``), the op reads it where it is; otherwise it is first copied
into the buffer (stream-ordered: one device copy).  The registered buffer is
therefore the ops' staging area: after a call made with another tensor it
holds that tensor.  The ops never allocate symmetric memory, never read device
values on the host and launch the same kernels on every call, so they can be
captured in CUDA graphs (``mode="reduce-overhead"``).

Why a name and not a lookup by the tensor's address: under ``torch.compile``
the op does not always receive the registered tensor.  Functionalization hands
an in-place op a clone of what it mutates (every backend but inductor, which
re-inplaces), a tensor written earlier in the same graph arrives as a new
tensor, and CUDA graphs copy inputs into static buffers; with a name the op
still finds its symmetric state and stages the tensor it got.  Fake (meta)
implementations read the world size from the registry, so the shapes of
all-gather and reduce-scatter propagate at compile time.

The ops (docs/torch-ops.md has the schemas): ``all_reduce``, ``all_reduce_out``,
``all_reduce_`` (the two-shot, in place), ``all_gather``, ``all_gather_out``,
``reduce_scatter``, ``reduce_scatter_out``, and the fused ``all_reduce_rmsnorm``
and ``all_reduce_residual_rmsnorm`` (:mod:`castpile.gpu.fused.rmsnorm`).  Sums
only; not differentiable.

The MoE dispatch and combine (:mod:`castpile.gpu.fused.moe`) take a registered
:class:`~castpile.gpu.fused.moe.MoE` state instead (``ops.register(state)``:
"moe1_w2"; one registry and one naming scheme, ``<kind><k>_w<world>``)::

    d = moe.Dispatched(*torch.ops.castpile.moe_dispatch(x, topk_idx, topk_weights, name))   # copies
    y = torch.ops.castpile.moe_combine(expert_out, d.slot_positions, name)

``moe_dispatch`` returns copies of what the library call leaves in the state
(one device copy of ``recv_x`` more than the library call); ``moe_combine``
takes the dispatch's ``slot_positions`` so that a compiled graph runs the
dispatch, and runs it first.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Sequence

import torch

from . import collectives
from .fused import moe, rmsnorm

_REGISTRY: dict[str, object] = {}


def register(state, name: str | None = None) -> str:
    """Make ``state`` reachable by the ops under ``name``; returns the name.

    ``state`` is a :class:`~castpile.gpu.symmetric.SymmetricTensor` (the
    collectives and fused ops; default name ``symm<k>_w<world size>``) or a
    :class:`~castpile.gpu.fused.moe.MoE` state (``moe_dispatch``,
    ``moe_combine``; default name ``moe<k>_w<world size>``), ``k`` counting
    this process's registrations.  The registry keeps ``state`` (and its
    memory) alive until :func:`unregister`: graphs captured with the ops hold
    its addresses.  Registering the same object again returns its name.  Call
    in the same order on every rank so that default names agree (compiled
    graphs hold the name as a constant).  A symmetric tensor's buffer is marked
    as a static address for ``torch.compile``, so a compiled function may take
    ``symm.tensor`` as an argument without CUDA graphs copying it.
    """
    for known, held in _REGISTRY.items():
        if held is state and name in (None, known):
            return known
    is_moe = isinstance(state, moe.MoE)
    if name is None:
        name = f"{'moe' if is_moe else 'symm'}{len(_REGISTRY)}_w{state.world_size}"
        while name in _REGISTRY:
            name += "_"
    elif name in _REGISTRY:
        raise ValueError(
            f"castpile.gpu.ops.register: the name {name!r} is taken by another registered state; "
            "unregister it first or choose another"
        )
    if not is_moe:
        import torch._dynamo

        torch._dynamo.mark_static_address(state.tensor)
    _REGISTRY[name] = state
    return name


def unregister(name: str) -> None:
    """Forget the state registered under ``name`` (graphs that use it must not run again)."""
    _REGISTRY.pop(name)


def lookup(name: str):
    """The state registered as ``name``: a :class:`~castpile.gpu.symmetric.SymmetricTensor` or a ``MoE``."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(
            f"no state is registered as {name!r} in this process; call "
            f"castpile.gpu.ops.register(...) first (registered: {sorted(_REGISTRY)})"
        ) from None


def _lookup_moe(name: str) -> moe.MoE:
    state = lookup(name)
    if not isinstance(state, moe.MoE):
        raise TypeError(
            f"{name!r} is a symmetric tensor, not a MoE state: the MoE ops take the name of a "
            "registered castpile.gpu.fused.moe.MoE"
        )
    return state


def staged(name: str, input: torch.Tensor):
    """The symmetric tensor registered as ``name``, with ``input`` copied into its buffer unless it is the buffer.

    ``input`` must have the buffer's shape, dtype and device.  For the bodies
    of ops over symmetric memory, the library's and yours (:func:`kernel_op`).
    """
    symm = _checked(name, input)
    if not _is_buffer(input, symm):
        symm.tensor.copy_(input)
    return symm


def _is_buffer(input: torch.Tensor, symm) -> bool:
    return input.data_ptr() == symm.tensor.data_ptr() and input.stride() == symm.tensor.stride()


def _checked(name: str, input: torch.Tensor):
    """The symmetric tensor registered as ``name``, after checking that ``input`` can stand for its buffer."""
    symm = lookup(name)
    if isinstance(symm, moe.MoE):
        raise TypeError(f"{name!r} is a MoE state, not a symmetric tensor: use it with moe_dispatch and moe_combine")
    buffer = symm.tensor
    if input.shape != buffer.shape or input.dtype != buffer.dtype or input.device != buffer.device:
        raise ValueError(
            f"{name!r} holds a {buffer.dtype} tensor of shape {tuple(buffer.shape)} on {buffer.device}; "
            f"the op was given {input.dtype} {tuple(input.shape)} on {input.device}"
        )
    return symm


def kernel_op(
    name: str,
    fn: Callable | None = None,
    *,
    mutates_args: Sequence[str] = (),
    like: str | None = None,
    fake: Callable | None = None,
    device_types=None,
):
    """``torch.library.custom_op(name, mutates_args=...)`` and its fake implementation, for a kernel launcher.

    ``fn`` has type-annotated parameters (Tensor, int, float, bool, str, lists
    of them) and returns a new tensor, a tuple of them or None.  Name in
    ``mutates_args`` every tensor parameter it writes into (torch requires it;
    such a tensor may not also be returned).  The fake implementation, which
    gives torch.compile the result's shape, dtype and device, is one of:
    ``like="x"``, a new contiguous tensor like parameter ``x``; ``fake=``, a
    function of the same parameters; or none, when ``fn`` returns None::

        @kernel_op("mylib::scaled_sum", like="x")
        def scaled_sum(x: torch.Tensor, symm: str, scale: float) -> torch.Tensor:
            s = ops.staged(symm, x)
            ...launch your kernel on s.buffer_ptrs, s.signal_pad_ptrs...
            return out
    """

    def wrap(fn):
        returns = inspect.signature(fn).return_annotation
        if fake is None and like is None and returns not in (None, "None"):
            raise TypeError(
                f"kernel_op({name!r}): give like= (a tensor parameter the result is shaped like) or "
                "fake= (a function of the same parameters returning the result's metadata)"
            )
        impl = fake if fake is not None else _like(fn, like) if like is not None else _returns_none
        op = torch.library.custom_op(name, fn, mutates_args=tuple(mutates_args), device_types=device_types)
        op.register_fake(impl)
        return op

    return wrap if fn is None else wrap(fn)


def _like(fn: Callable, parameter: str) -> Callable:
    signature = inspect.signature(fn)
    if parameter not in signature.parameters:
        raise TypeError(f"kernel_op: like={parameter!r} is not a parameter of {fn.__name__}{signature}")

    def fake(*args, **kwargs):
        t = signature.bind(*args, **kwargs).arguments[parameter]
        return t.new_empty(t.shape)

    return fake


def _returns_none(*args, **kwargs):
    return None


# The library's collectives ------------------------------------------------------------------------------------

_ALL_REDUCE = {
    "auto": collectives.all_reduce,
    "one_shot": collectives.all_reduce_one_shot,
    "low_latency": collectives.all_reduce_low_latency,
}


def _all_reduce_with(algorithm: str):
    if algorithm not in _ALL_REDUCE:
        raise ValueError(f"castpile all_reduce: algorithm must be one of {sorted(_ALL_REDUCE)}, got {algorithm!r}")
    return _ALL_REDUCE[algorithm]


def _fake_all_reduce(input, symm, algorithm="auto"):
    _checked(symm, input)
    _all_reduce_with(algorithm)
    return input.new_empty(input.shape)


def _gathered_shape(input, symm):
    return (_checked(symm, input).world_size, *input.shape)


def _scattered_shape(input, symm):
    world = _checked(symm, input).world_size
    if input.shape[0] % world:
        raise ValueError(f"castpile reduce_scatter: dim 0 ({input.shape[0]}) is not a multiple of {world} ranks")
    return (input.shape[0] // world, *input.shape[1:])


@kernel_op("castpile::all_reduce", fake=_fake_all_reduce)
def all_reduce(input: torch.Tensor, symm: str, algorithm: str = "auto") -> torch.Tensor:
    """Sum over ranks of ``input``, a new tensor.

    ``algorithm``: "auto" (low-latency where the tensor has its scratch, else one-shot), "one_shot", "low_latency".
    """
    return _all_reduce_with(algorithm)(staged(symm, input))


@kernel_op("castpile::all_reduce_out", mutates_args=("out",))
def all_reduce_out(input: torch.Tensor, symm: str, out: torch.Tensor, algorithm: str = "auto") -> None:
    """Sum over ranks of ``input``, written into ``out`` (contiguous, ``input``'s shape and dtype)."""
    _all_reduce_with(algorithm)(staged(symm, input), out)


@kernel_op("castpile::all_reduce_", mutates_args=("input",))
def all_reduce_(input: torch.Tensor, symm: str) -> None:
    """Sum over ranks of ``input``, in place: the two-shot all-reduce (staged unless ``input`` is the buffer)."""
    handle = staged(symm, input)
    collectives.all_reduce_two_shot(handle)
    if not _is_buffer(input, handle):
        input.copy_(handle.tensor)


@kernel_op("castpile::all_gather", fake=lambda input, symm: input.new_empty(_gathered_shape(input, symm)))
def all_gather(input: torch.Tensor, symm: str) -> torch.Tensor:
    """Every rank's ``input`` stacked: shape ``(world_size, *input.shape)``."""
    return collectives.all_gather(staged(symm, input))


@kernel_op("castpile::all_gather_out", mutates_args=("out",))
def all_gather_out(input: torch.Tensor, symm: str, out: torch.Tensor) -> None:
    """Every rank's ``input`` stacked into ``out`` (contiguous, ``(world_size, *input.shape)``)."""
    collectives.all_gather(staged(symm, input), out)


@kernel_op("castpile::reduce_scatter", fake=lambda input, symm: input.new_empty(_scattered_shape(input, symm)))
def reduce_scatter(input: torch.Tensor, symm: str) -> torch.Tensor:
    """This rank's chunk (along dim 0) of the sum over ranks of ``input``."""
    return collectives.reduce_scatter(staged(symm, input))


@kernel_op("castpile::reduce_scatter_out", mutates_args=("out",))
def reduce_scatter_out(input: torch.Tensor, symm: str, out: torch.Tensor) -> None:
    """This rank's chunk of the sum over ranks of ``input``, written into ``out``."""
    collectives.reduce_scatter(staged(symm, input), out)


# Fused ops (castpile.gpu.fused) -------------------------------------------------------------------------------


def _fake_rmsnorm(input, symm, *args, **kwargs):
    _checked(symm, input)
    return input.new_empty(input.shape)


def _method(method: str):
    return None if method == "auto" else method


@kernel_op("castpile::all_reduce_rmsnorm", fake=_fake_rmsnorm)
def all_reduce_rmsnorm(
    input: torch.Tensor, symm: str, weight: torch.Tensor, eps: float = 1e-6, method: str = "auto"
) -> torch.Tensor:
    """``rms_norm(sum over ranks of input) * weight``; ``input`` (rows, D).

    ``method``: "auto" (low-latency where the tensor has its scratch), "low_latency" or "one_shot".
    """
    return rmsnorm.all_reduce_rmsnorm(staged(symm, input), weight, eps, method=_method(method))


@kernel_op("castpile::all_reduce_residual_rmsnorm", mutates_args=("residual",), fake=_fake_rmsnorm)
def all_reduce_residual_rmsnorm(
    input: torch.Tensor,
    symm: str,
    residual: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    method: str = "auto",
) -> torch.Tensor:
    """``residual += sum over ranks of input`` (in place); returns ``rms_norm(residual) * weight``."""
    return rmsnorm.all_reduce_residual_rmsnorm(staged(symm, input), residual, weight, eps, method=_method(method))


# MoE dispatch and combine (castpile.gpu.fused.moe) ------------------------------------------------------------

#: The outputs of ``moe_dispatch``, in order: the fields of :class:`~castpile.gpu.fused.moe.Dispatched`.
DISPATCHED = tuple(moe.Dispatched.__dataclass_fields__)
#: ``moe_dispatch``'s result: one tensor per name of DISPATCHED (spelled out, so that type checkers read it too).
_DispatchResult = tuple[
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
]
assert len(typing.get_args(_DispatchResult)) == len(DISPATCHED)


def _moe_inputs(state: str, **tensors):
    """The MoE state registered as ``state``, after checking each tensor's shape, dtype and device against it."""
    st = _lookup_moe(state)
    T, H, K = st.tokens, st.hidden, st.topk
    expected = {
        "x": ((T, H), (st.dtype,)),
        "topk_idx": ((T, K), (torch.int32, torch.int64)),
        "topk_weights": ((T, K), (torch.float32,)),
        "expert_out": ((st.capacity_pairs, H), (st.dtype,)),
        "slot_positions": ((st.world_size, T, K), (torch.int32,)),
    }
    device = st.recv_counts.device
    for name, t in tensors.items():
        shape, dtypes = expected[name]
        if tuple(t.shape) != shape or t.dtype not in dtypes or t.device != device:
            want = " or ".join(str(d) for d in dtypes)
            raise ValueError(
                f"castpile MoE op on {state!r}: {name} must be a {want} tensor of shape {shape} on "
                f"{device}, got {t.dtype} {tuple(t.shape)} on {t.device}"
            )
    return st


def _results(st: moe.MoE) -> list[torch.Tensor]:
    """The library's results in the state (views of its buffers), in the order of :data:`DISPATCHED`."""
    return [getattr(st.dispatched, f) for f in DISPATCHED]


def _fake_moe_dispatch(x, topk_idx, topk_weights, state):
    st = _moe_inputs(state, x=x, topk_idx=topk_idx, topk_weights=topk_weights)
    return tuple(x.new_empty(t.shape, dtype=t.dtype) for t in _results(st))


@kernel_op("castpile::moe_dispatch", fake=_fake_moe_dispatch)
def moe_dispatch(x: torch.Tensor, topk_idx: torch.Tensor, topk_weights: torch.Tensor, state: str) -> _DispatchResult:
    """:func:`castpile.gpu.fused.moe.dispatch` on the MoE state registered as ``state`` (collective).

    Returns copies (new contiguous tensors) of what the call leaves in the
    state, in the order of :data:`DISPATCHED`: ``recv_x`` [W, T, H],
    ``recv_counts`` [W], ``expert_counts`` [E_local], ``expert_offsets``
    [E_local + 1], ``grouped_rows`` [capacity_pairs], ``slot_positions``
    [W, T, K], ``recv_weights`` [W, T, K] fp32, ``recv_src_token`` [W, T],
    ``recv_topk_idx`` [W, T, K] (``recv_x`` in the state's dtype, the others
    but the weights int32).  ``moe.Dispatched(*result)`` names them.  Inputs
    need not be contiguous (they are made so).
    """
    st = _moe_inputs(state, x=x, topk_idx=topk_idx, topk_weights=topk_weights)
    moe.dispatch(st, x.contiguous(), topk_idx.contiguous(), topk_weights.contiguous())
    copies = tuple(t.clone(memory_format=torch.contiguous_format) for t in _results(st))
    return typing.cast(_DispatchResult, copies)  # one per name of DISPATCHED, which the alias counts


def _fake_moe_combine(expert_out, slot_positions, state):
    st = _moe_inputs(state, expert_out=expert_out, slot_positions=slot_positions)
    return expert_out.new_empty((st.tokens, st.hidden))


@kernel_op("castpile::moe_combine", fake=_fake_moe_combine)
def moe_combine(expert_out: torch.Tensor, slot_positions: torch.Tensor, state: str) -> torch.Tensor:
    """:func:`castpile.gpu.fused.moe.combine` on the MoE state registered as ``state`` (collective): [T, H].

    ``expert_out`` [capacity_pairs, H] in the last dispatch's ``grouped_rows``
    order.  ``slot_positions`` is that dispatch's output of the same name: the
    kernel reads the state's own copy, so the argument only makes the combine
    depend on the dispatch in a compiled graph (dispatch first, and not
    dropped as dead code).
    """
    st = _moe_inputs(state, expert_out=expert_out, slot_positions=slot_positions)
    return moe.combine(st, expert_out.contiguous())


__all__ = [
    "DISPATCHED",
    "all_gather",
    "all_gather_out",
    "all_reduce",
    "all_reduce_",
    "all_reduce_out",
    "all_reduce_residual_rmsnorm",
    "all_reduce_rmsnorm",
    "kernel_op",
    "lookup",
    "moe_combine",
    "moe_dispatch",
    "reduce_scatter",
    "reduce_scatter_out",
    "register",
    "staged",
    "unregister",
]
