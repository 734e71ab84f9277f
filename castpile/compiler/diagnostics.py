"""The diagnostic catalogue: every message the compiler gives about a place in a user's file, defined once.

Each entry is a :class:`Message`: a stable id, the problem, and the fix it suggests, both
``str.format`` templates over named parameters.  The message printed is the problem, the
entry's joiner (``"; "`` unless it says otherwise) and the fix::

    >>> SUBSCRIPT_ONLY.text(name="bufs")
    "'bufs' is a multicast tensor and may only be subscripted, as in bufs[idx]"

A diagnostic (:class:`~castpile.compiler.errors.Diagnostic`) keeps the id and the parameters
beside the text, and its headline ends with the id, ``kern.py:12:9: error: ... [castpile:E201]``,
which docs/language.md ("Errors") lists with every message and fix.  Ids are grouped by what
they are about; an id is never renumbered or given to another message (users search for it):

* ``E0xx`` reading the file: syntax, bytes, size, nesting and repetition castpile's parser cannot take;
* ``E1xx`` bindings: ``multicast_like``'s arguments, table slices, ``remote=``;
* ``E2xx`` where a multicast tensor or access may stand;
* ``E3xx`` indices;
* ``E4xx`` calls: their arguments, and loads, stores, atomics, ``signal``/``wait`` on accesses;
* ``E5xx`` names: castpile's calls outside a jit function, missing imports, names bound two ways.
* ``E6xx`` multicast tensors passed to helpers: ``castpile.Multicast`` parameters and their calls;
* ``E7xx`` ``@castpile.jit``: the decorated function and its source.

Adding a message:

1. add ``NAME = Message("E1nn", "problem with '{param}'", "the fix")`` to its group below, with
   that group's next free id (a ``joiner=`` where ``"; "`` does not read well);
2. report it with ``plan.error(node, NAME, param=...)`` in an analysis pass (the node locates it)
   or ``NAME.at(path, line, col, source_line, param=...)`` where there is no tree yet;
3. test it by id: a case that expects ``("E1nn", {"param": ...})`` (tests/test_diagnostics.py
   and its friends; tests/test_diagnostic_catalogue.py fails for an id no test names);
4. run ``python scripts/errors_table.py`` to rewrite the table in docs/language.md (a test fails
   while the table and this catalogue differ).

Not here: the command line's and the import hook's own errors (bad options, files that cannot be
read or written: ``castpile: error: ...``, exit status 2) are about the run, not a place in a file.
"""

from __future__ import annotations

from .errors import Diagnostic

CATALOGUE: dict[str, Message] = {}
"""Every message by id, in the order defined."""


class Message:
    """One entry of the catalogue: ``id``, the ``problem`` and ``fix`` templates, and the ``joiner`` between them."""

    __slots__ = ("fields", "fix", "id", "joiner", "problem")

    def __init__(self, id: str, problem: str, fix: str = "", joiner: str = "; "):
        if id in CATALOGUE:
            raise ValueError(f"diagnostic id {id} is defined twice")
        self.id, self.problem, self.fix, self.joiner = id, problem, fix, joiner
        self.fields = frozenset(_fields(problem) + _fields(fix))
        CATALOGUE[id] = self

    @property
    def template(self) -> str:
        """The whole message with its ``{parameters}`` unfilled."""
        return self.problem + self.joiner + self.fix if self.fix else self.problem

    def text(self, **params) -> str:
        """The message with ``params`` filled in (exactly the template's parameters)."""
        if set(params) != self.fields:
            raise TypeError(f"{self.id} takes the parameters {sorted(self.fields)}, not {sorted(params)}")
        return self.template.format(**params)

    def at(self, path: str, line: int, col: int, source_line: str = "", **params) -> Diagnostic:
        """This message as a diagnostic at 1-based ``line`` and ``col`` of ``path``."""
        return Diagnostic(path, line, col, self.id, self.text(**params), params, source_line)

    def __repr__(self):
        return f"Message({self.id!r}, {self.template!r})"


def _fields(template: str) -> list[str]:
    import string  # here: `import castpile` stays cheap

    return [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]


# ---- E0xx reading the file -------------------------------------------------------------------------
_SPLIT = "split it into smaller statements"

SYNTAX = Message("E001", "syntax error: {detail}")
NUL_BYTE = Message("E002", "syntax error: source contains a NUL byte", "remove it")
UNDECODABLE = Message(
    "E003", "syntax error: byte {byte} is not valid {encoding}", "declare the file's encoding or convert it"
)
TOO_DEEP_FOR_PYTHON = Message(
    "E004", "file is nested too deeply for Python's parser", "split its deepest expressions into smaller statements"
)
TOO_LARGE = Message("E005", "file is {size} MiB; castpile transpiles files of up to {limit} MiB", "split it", ": ")
TOO_DEEP = Message(
    "E006", "expression nested too deeply for castpile (it nests {depth} levels; castpile takes {limit})", _SPLIT
)
TOO_DEEP_FOR_THE_STACK = Message("E007", "expression nested too deeply for castpile", _SPLIT)
TOO_MANY_FOR_CLAUSES = Message(
    "E008", "comprehension with more than {limit} 'for' clauses: castpile's parser takes no more", "split it"
)
TOO_MANY_STRINGS = Message(
    "E009", "more than {limit} implicitly concatenated strings: castpile's parser takes no more", "join some"
)
PARSER_GAP = Message(
    "E010",
    "castpile's parser cannot read this, although Python can: {detail}",
    "write it another way, and please report it",
)

# ---- E1xx bindings ---------------------------------------------------------------------------------
BINDING_NOT_PLAIN = Message(
    "E101", "multicast_like must be bound by a plain assignment", "`name = multicast_like(...)`", ": "
)
BOUND_TWICE = Message(
    "E102",
    "'{name}' is already bound by multicast_like in this function (one binding per name)",
    "bind the other multicast tensor to a name of its own",
)
NOT_A_TUPLE = Message("E103", "{keyword}= must be a non-empty tuple literal", "such as (n,) or (m, n)", " ")
STRIDES_LENGTH = Message(
    "E104", "strides= has {strides} entries but shape= has {shape}", "give one stride per dimension"
)
ALIGN = Message("E105", "align= must be a power-of-two integer (bytes), or None")
SLICE_NAME_REACHED = Message(
    "E107",
    "'{name}' holds a table {what}, but another assignment of it may reach this binding (before it, or in a "
    "loop around it)",
    "bind the {what} to a name once before the binding, or pass {spelled} itself",
)
SLICE_STEP = Message("E108", "a table slice takes no step", "write table[lo:hi]")
SLICE_UNBOUNDED = Message("E109", "a table slice needs an upper bound", "table[:WORLD] or table[lo:hi]", ": ")
SLICE_NOT_CONSTEXPR = Message(
    "E110",
    "table slice bounds must be constexpr",
    "integer literals, tl.constexpr parameters or names, tl.static_range loop variables, and + - * // % of those",
    ": ",
)
SLICE_EMPTY = Message(
    "E111", "empty table slice: it selects {count} buffers", "give it an upper bound above its lower bound"
)
REMOTE_BACKEND = Message("E112", "remote= must be the string literal {backends}")
REMOTE_NEEDS_TABLE = Message(
    "E113",
    "remote= needs a table slice or entry as ptr_tile (table[lo:hi] or table[r] of a "
    "remote_ptrs table): its header names the scratch for NVSHMEM transfers",
)
REMOTE_KERNEL_NESTED = Message(
    "E114",
    "'{kernel}' has a remote= binding, so it is a kernel that castpile wraps for NVSHMEM by name",
    "define it at the top level of the module",
    ": ",
)
EXAMPLE_POINTER_TYPE = Message(
    "E115",
    "multicast_like's example is a pointer (the buffers have its element type) or an "
    "element type such as tl.bfloat16, not a pointer type",
)
ENTRY_INDICES = Message(
    "E116",
    "table[r] takes one index, the table entry of the one peer",
    "table[r], or a slice table[lo:hi] for several",
    ": ",
)
NOT_AN_ENTRY = Message(
    "E117", "'{code}' is not a table entry", "table[r] takes an integer scalar r (run time or constexpr)", ": "
)

# ---- E2xx where a multicast tensor or access may stand ---------------------------------------------
_LOOP_FIX = "bind the multicast tensor to a name of its own, or bind it before the loop"

SUBSCRIPT_ONLY = Message(
    "E201", "'{name}' is a multicast tensor and may only be subscripted", "as in {name}[idx]", ", "
)
PASSED = Message("E202", "'{name}' is a multicast tensor and cannot be passed to a function", "pass {name}[idx]")
REASSIGNED = Message(
    "E203", "'{name}' is a multicast tensor and cannot be reassigned", "bind the new value to a name of its own"
)
DELETED = Message("E204", "a multicast tensor cannot be deleted", "leave the del out")
ANNOTATED = Message(
    "E205", "a multicast tensor cannot be the target of an annotated assignment", "leave the annotation out"
)
IN_FSTRING = Message(
    "E206", "'{name}' is a multicast tensor and cannot be used inside an f-string", "compute the value first"
)
NESTED_USE = Message(
    "E207",
    "'{name}' is a multicast tensor of the enclosing jit function; nested functions and lambdas cannot use it",
    "load it in the jit function and pass them the values",
)
USED_IN_OWN_BINDING_IN_LOOP = Message(
    "E208",
    "'{name}' is used in its own binding, which is inside a loop, so from "
    "the second pass on it would be the multicast tensor",
    _LOOP_FIX,
)
USED_BEFORE_BINDING_IN_LOOP = Message(
    "E209",
    "'{name}' is used in a loop before `{name} = multicast_like(...)` further "
    "on in it, so from the second pass on it would be the multicast tensor",
    _LOOP_FIX,
)
STORE_NOT_SINGLE = Message("E210", "a multicast store must be a single assignment", "`{name}[idx] = value`", ": ")
ACCESS_AS_TARGET = Message(
    "E211", "a multicast access cannot be the target of {where}", "store it in its own statement `{name}[idx] = value`"
)

# ---- E3xx indices ----------------------------------------------------------------------------------
SLICE_INDEX = Message("E301", "slices are not multicast indices", "index '{name}' with tl.arange(...) tensors", ": ")
STARRED_INDEX = Message("E302", "starred indices are not supported", "write each index out")
NOT_AN_INDEX = Message(
    "E303", "'{code}' is not an index", "index '{name}' with Triton integer scalars or tensors", ": "
)
INDEX_COUNT = Message("E304", "'{name}' takes {takes} ({what}) but is indexed with {given}")
ELLIPSIS_NOT_LAST = Message("E305", "'...' may only come last in a multicast index", "as in {name}[i, ...]", ", ")
ELLIPSIS_WITHOUT_SHAPE = Message("E306", "'...' needs the extents of '{name}'", "give multicast_like a shape=", ": ")
ELLIPSIS_INDEX_COUNT = Message("E307", "'{name}' takes {takes} (shape) but is indexed with {given} and '...'")
ELLIPSIS_EXTENT = Message(
    "E308", "'...' stands for full extents, which must be constexpr powers of two; '{extent}' is not"
)

# ---- E4xx calls ------------------------------------------------------------------------------------
STARRED_ARGUMENTS = Message("E401", "{call}: *args and **kwargs cannot be used here", "spell the arguments out")
TOO_MANY_POSITIONAL = Message("E402", "{call}: too many positional arguments (at most {most})")
UNEXPECTED_KEYWORD = Message("E403", "{call}: unexpected keyword argument '{keyword}'")
GIVEN_TWICE = Message("E404", "{call}: argument '{keyword}' given twice")
MISSING_ARGUMENT = Message("E405", "{call}: missing argument '{keyword}'")
POINTER_FIRST = Message("E406", "{call} needs the pointer (a multicast access) as its first argument")
BLOCK_POINTER_KEYWORD = Message("E407", "{keyword}= is for block pointers, not multicast accesses", "leave it out")
# E408 ("castpile.signal takes a multicast access") is retired: signal takes plain pointers since v1.3.
RETURNS_NOTHING = Message("E409", "{call} returns nothing", "call it as a statement of its own", ": ")
REMOTE_ATOMIC = Message(
    "E410",
    "tl.{op} on '{name}', a remote= binding: NVSHMEM atomics are not among torch's Triton device functions, "
    "and a get-modify-put would not be atomic",
    "use castpile.signal/wait, or a binding without remote= for peers in one NVLink domain",
)
PER_BUFFER_MASK = Message(
    "E411",
    "this mask= of {op} on '{name}' is built from tl.{arange}, which spans the stack of '{name}' (one flag per "
    "buffer), but an access's mask is over its elements (shape I)",
    "mark the buffers with multicast_like(..., ptr_mask=...) instead",
)
DTYPE_TILE_CAS = Message(
    "E412",
    "{what} on '{name}': its binding's example is a dtype and its tile a tensor, which names no memory for the "
    "compare-and-swap's masked-off lanes (they swap a value for itself at the example)",
    "pass a pointer of that type as example, or bind table[r] or table[lo:hi]",
)
WAIT_CMP = Message(
    "E413",
    'castpile.wait: cmp= must be one of {allowed} (the flag on the left: cmp="ge" waits until flag >= value)',
)
SIGNAL_OP = Message("E414", "castpile.signal: op= must be one of {allowed}")
ADD_WITH_WAIT_FOR = Message(
    "E415",
    'castpile.signal: op="add" takes no wait_for= (an add never waits for a value)',
    'signal with op="set" and wait_for=, or let the waiting side wait with cmp="ge" on a count',
)
REMOTE_SIGNAL_ADD = Message(
    "E416",
    "castpile.signal(op=\"add\") on '{name}', a remote= binding: NVSHMEM's signal_op adds to 64-bit words only "
    "and castpile's flags have the binding's type (signal pads are int32), and a get-add-put would not be atomic",
    'use op="set", or a binding without remote= for peers in one NVLink domain',
)
COUNTING_WAIT = Message(
    "E417",
    "castpile.wait(decrement=True) is a counting semaphore: it waits until each flag is >= value and takes value "
    "from it, so it takes {what}",
    "leave {keyword}= out (or wait with decrement=False for cmp= and reset=)",
)
REMOTE_WAIT_FORM = Message(
    "E418",
    "castpile.wait on '{name}', a remote= binding: {form} needs an atomic read-modify-write of the remote flag, "
    "which torch's NVSHMEM Triton device functions do not offer for the binding's flag type",
    "use a binding without remote= for peers in one NVLink domain, or wait without it",
)
MULTI_OPERAND_REDUCE = Message(
    "E419",
    "tl.reduce over axis 0 of '{name}' with several operands: castpile folds a stack's valid buffers only for a "
    "reduction of one operand, and a tuple's padded or ptr_mask-false buffers would take part",
    "reduce the access alone (tl.reduce(bufs[idx], 0, fn)), or tl.max/tl.min(..., return_indices=True) for "
    "the positions",
)

# ---- E5xx names ------------------------------------------------------------------------------------
OUTSIDE_JIT = Message("E501", "{call} is only valid inside a @triton.jit function")
NOT_DEFINED = Message("E502", "'{name}' is not defined", "add `{statement}` to use {what}", ": ")
BOUND_TWO_WAYS = Message(
    "E503",
    "'{head}' is bound to {meaning} and also to something else, so castpile cannot tell what '{call}' calls",
    "bind '{head}' once (an import under `try` with a fallback under `except ImportError` is fine)",
)

# ---- E6xx multicast tensors passed to helpers (castpile.Multicast parameters) -----------------------
MULTICAST_PARAM_NOT_JIT = Message(
    "E601",
    "'{function}' is not a @triton.jit function, so its parameter '{param}' cannot take a multicast tensor",
    "decorate '{function}' with @triton.jit, or drop the castpile.Multicast annotation",
    ": ",
)
MULTICAST_PARAM_STARRED = Message(
    "E602",
    "'{param}' cannot take multicast tensors as *args or **kwargs",
    "annotate a parameter of its own `bufs: castpile.Multicast` for each",
    ": ",
)
MULTICAST_HELPER_NOT_TOP_LEVEL = Message(
    "E603",
    "'{function}' takes a multicast tensor, so castpile rewrites its calls by name",
    "define it once, at the top level of the module",
    ": ",
)
MULTICAST_PARAM_DEFAULT = Message(
    "E604", "the Multicast parameter '{param}' takes no default", "every call passes a multicast tensor", ": "
)
MULTICAST_CALL_STARRED = Message(
    "E605",
    "'{function}' takes multicast tensors",
    "pass its arguments by position or keyword, not through * or **",
    ": ",
)
MULTICAST_TO_PLAIN_PARAM = Message(
    "E606",
    "'{name}' is a multicast tensor, but parameter '{param}' of '{function}' is not annotated castpile.Multicast",
    "annotate it `{param}: castpile.Multicast`, or pass {name}[idx]",
    ": ",
)
NOT_MULTICAST_FOR_PARAM = Message(
    "E607",
    "parameter '{param}' of '{function}' is annotated castpile.Multicast, so it takes a multicast tensor",
    "pass a name bound by multicast_like (or a Multicast parameter), not '{code}'",
    ": ",
)
MULTICAST_PARAM_MISSING = Message(
    "E608",
    "'{function}' takes a multicast tensor for its parameter '{param}' (castpile.Multicast), but this call passes none",
    "pass one, as in {function}(..., {param}=bufs)",
    ": ",
)
MULTICAST_PARAM_INDEX_COUNT = Message(
    "E609", "'{name}' takes {takes} (the multicast tensors passed to it have {dims}) but is indexed with {given}"
)
MULTICAST_PARAM_LAYOUTS = Message(
    "E610",
    "'{param}' of '{function}' (castpile.Multicast) receives {here} here but {there} at another call",
    "every tensor it receives must have the same element dims, and remote= given to all or to none; write one helper "
    "for each",
    ": ",
)
MULTICAST_PARAM_REBOUND = Message(
    "E611", "'{name}' is a Multicast parameter of this function", "bind the new multicast tensor to a name of its own"
)
MULTICAST_PARAM_ELLIPSIS = Message(
    "E612",
    "'...' needs the extents of '{name}', which its callers pass",
    "index a Multicast parameter's element dims explicitly, with tl.arange(...) tensors",
    ": ",
)

# ---- E7xx @castpile.jit: the decorated function and its source -------------------------------------
JIT_NO_SOURCE = Message(
    "E701",
    "castpile.jit cannot read the source of {function}",
    "define the kernel in a Python file or a notebook cell, where inspect.getsource finds it",
    ": ",
)
JIT_NO_DEF = Message(
    "E702",
    "castpile.jit cannot find the def of {function} at this line of its source",
    "was the file edited after it was run?",
    ": ",
)
JIT_NOT_AT_DEF = Message(
    "E703",
    "castpile.jit must decorate {function} where it is defined",
    "write @castpile.jit on the line above `def {function}`, rather than calling castpile.jit({function})",
    ": ",
)
JIT_HELPER_LEFT_TO_TRITON = Message(
    "E704",
    "{kernel} calls {function}, which uses castpile, but @triton.jit does not transpile it",
    "decorate {function} with @castpile.jit as well",
    ": ",
)
