"""The helpers' calling convention: which helper each lowered use calls, and how it takes the user's arguments.

A use calls the helper :data:`HELPERS` names for its kind and its *route*: the module's
strategy (``loop``, ``gather``), or ``remote`` for an access through a ``remote=`` binding
(buffer by buffer, NVSHMEM for remote buffers).  A reduction's route is its binding's, not
the strategy's: ``loop`` for a table, ``gather`` for a tile, ``passed`` (either, as the caller's is) for a
Multicast parameter.  The names are the helpers' own
(``HELPER_PREFIX`` first), so that a search for a helper finds its caller here; a module
whose words already start with the prefix gets the helpers renamed.
"""

from .contract import ATOMICS

HELPER_PREFIX = "_castpile_"
SITE_WORD = "site"  # after the prefix: stands for a store's or a wait's "path:line" until emit knows the line

# (use kind, route) -> helper.  "atomic" is every read-modify-write of contract.ATOMICS (the operation is
# the helper's OP); tl.atomic_* on a remote= binding is rejected by analysis, so it has no remote route.
HELPERS = {
    ("load", "loop"): "_castpile_load_loop",
    ("load", "gather"): "_castpile_load_gather",
    ("load", "remote"): "_castpile_load_remote",
    ("store", "loop"): "_castpile_store_loop",
    ("store", "gather"): "_castpile_store_gather",
    ("store", "remote"): "_castpile_store_remote",
    ("reduce", "loop"): "_castpile_reduce_loop",
    ("reduce", "gather"): "_castpile_reduce_gather",
    ("reduce", "remote"): "_castpile_reduce_remote",
    ("reduce", "passed"): "_castpile_reduce_passed",
    ("atomic", "loop"): "_castpile_atomic_loop",
    ("atomic", "gather"): "_castpile_atomic_gather",
    ("atomic_cas", "loop"): "_castpile_atomic_cas_loop",
    ("atomic_cas", "gather"): "_castpile_atomic_cas_gather",
    ("signal", "loop"): "_castpile_signal",
    ("signal", "gather"): "_castpile_signal",
    ("signal", "remote"): "_castpile_signal_remote",
    ("wait", "loop"): "_castpile_wait",
    ("wait", "gather"): "_castpile_wait",
    ("wait", "remote"): "_castpile_wait_remote",
}

# Debug mode (CASTPILE_DEBUG_WAITS): the helper that gives up at a deadline in place of each helper that spins
# (castpile.signal's only with wait_for=; a remote= signal's spin has none), called with site= and deadline_ns=.
GIVING_UP = {
    "_castpile_wait_flags": "_castpile_wait_flags_until",
    "_castpile_wait": "_castpile_wait_until",
    "_castpile_wait_remote": "_castpile_wait_remote_until",
    "_castpile_signal": "_castpile_signal_until",
    "_castpile_signal_flags": "_castpile_signal_flags_until",
}

# The helpers the lowering calls for parts of an access rather than for the access itself.
INDEX = "_castpile_index"  # offs, bounds of indices evaluated once
UNBOUNDED = "_castpile_unbounded"  # no bounds: the call's mask proves the access inside an integer extent
SPAN = "_castpile_span"  # what a trailing ``...`` stands for, one dim
TRAILING = "_castpile_trailing"  # an explicit index before ``...``
IN_ORDER = "_castpile_in_order"  # values evaluated in the order written, handed over in the helper's
WAIT_FLAGS = "_castpile_wait_flags"  # castpile.wait on plain pointers
SIGNAL_FLAGS = "_castpile_signal_flags"  # castpile.signal on plain pointers
ENTRY = "_castpile_table_entry"  # the address of one peer, table[r], loaded at the binding
TYPED = "_castpile_typed"  # the example pointer of a binding whose example is a dtype
SLICE_MASK = "_castpile_slice_mask"  # a table slice's ptr_mask, checked, at the binding
ALIGNMENT = "_castpile_alignment"  # a binding's align= that is no literal, checked when Triton compiles it
OTHER_AXIS = "_castpile_other_axis"  # a multi-operand tl.reduce's axis that is no literal, refused where it is 0
REMOTE_KERNEL = "_castpile_remote_kernel"  # wraps a kernel with remote= bindings for NVSHMEM

# The user's arguments that carry values (contract.VALUE_PARAMS) go to the helpers by position, in
# that order (Triton evaluates keyword arguments before positional ones), with these defaults where
# one before the last given is left out; the others (constexpr options) go by keyword.
DEFAULTS = {"mask": "None", "other": "None", "value": "1", "wait_for": "None", "reset": "0"}
OPTIONS = {
    "load": ("cache_modifier", "eviction_policy", "volatile"),
    "store": ("cache_modifier", "eviction_policy"),
    "atomic_cas": ("sem", "scope"),
    "signal": ("op", "sem", "scope"),
    "wait": ("cmp", "sem", "scope", "decrement"),
    **dict.fromkeys(ATOMICS, ("sem", "scope")),
}
