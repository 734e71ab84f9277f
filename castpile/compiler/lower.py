"""Lowering: the Triton source that replaces each use of the plan.

The pass works from the plan alone: for each planned node it writes the text that
replaces it, where a use nested inside another (a multicast load in an index, say)
appears as that use's placeholder name; :mod:`castpile.compiler.emit` puts the texts in
place.  A table binding::

    bufs = multicast_like(out, dev_ptrs[:WORLD], shape=(n,))
    x = bufs[offs]

becomes::

    bufs = dev_ptrs
    x = _castpile_load_loop(bufs, WORLD, None, out, offs, (offs >= 0) & (offs < n))

The arguments of every access helper are the stack (``src, count, smask``), the
example pointer, the element offsets and the bounds mask, then the user's
arguments in the contract's order, and ``base=`` where an index dim is a scalar (each
buffer's pointer takes it first); see :mod:`castpile.compiler.helpers`.  The bounds mask
leaves out every ``i >= 0`` that :mod:`.index_facts` proves (docs/language.md, "What castpile
emits for an index").  Every index,
value and mask is evaluated once, in source order: indices that are not pure
go through ``*_castpile_index((i, ...), extents, strides)`` in expressions, and
into fresh names on the statement's own line in stores; so do value arguments with side
effects written out of the helper's order, in a call that stands alone as a statement.
Multicast parameters, and the calls that pass them, are lowered by :mod:`.lower_passing`.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

import libcst as cst

from .algebra import bounds_mask, offsets, split_offsets, strides
from .calling import (
    DEFAULTS,
    GIVING_UP,
    HELPER_PREFIX,
    HELPERS,
    IN_ORDER,
    INDEX,
    OPTIONS,
    OTHER_AXIS,
    SIGNAL_FLAGS,
    SITE_WORD,
    SPAN,
    TRAILING,
    UNBOUNDED,
    WAIT_FLAGS,
)
from .contract import ATOMICS, VALUE_PARAMS
from .lower_bindings import BindingLowering, StackText
from .lower_passing import PassedLowering
from .plan import (
    Access,
    AugStore,
    Binding,
    CallOn,
    GuardedReduce,
    HelperCall,
    Load,
    MulticastParam,
    Plan,
    Reduction,
    SliceAlias,
    Store,
)
from .render import Renderer
from .walk import paths_to


@dataclass
class Lowering:
    """What replaces each planned node: its placeholder name and its text (the statements
    of a statement use, one expression otherwise); the helpers called, named with
    ``prefix``; and ``paths``, every node on a path from the module to a planned node."""

    placeholders: dict[cst.CSTNode, str]
    replacements: dict[cst.CSTNode, list[str]]
    helpers: set[str]
    prefix: str
    paths: set[cst.CSTNode]


def lower(module: cst.Module, plan: Plan, strategy: str, debug_waits: float | None = None) -> Lowering:
    """The replacement of every use in ``plan`` under ``strategy``; with ``debug_waits``, waits that give up after
    that many seconds."""
    prefix = helper_prefix(plan.words)
    placeholders = {node: f"{prefix}slot{k}" for k, node in enumerate(plan.uses)}
    paths = paths_to(module, set(plan.uses))
    lowerer = Lowerer(strategy, plan.words, prefix, Renderer(placeholders, paths), debug_waits)
    replacements = {node: lowerer.use(use) for node, use in plan.uses.items()}
    return Lowering(placeholders, replacements, lowerer.helpers, prefix, paths)


def _tuple(items) -> str:
    """A tuple display of source texts."""
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


def helper_prefix(words: set[str]) -> str:
    """``_castpile_``, or ``_castpile2_``, ... if a word of the file already starts with it."""
    for prefix in itertools.chain([HELPER_PREFIX], (f"_castpile{k}_" for k in itertools.count(2))):
        if not any(word.startswith(prefix) for word in words):
            return prefix
    raise AssertionError("unreachable")


class Lowerer:
    """Builds replacement source for one module and strategy.

    Names it makes (hoisted binding arguments, temporaries) are fresh against
    ``words``, every word of the file; helpers and temporaries start with ``prefix``.
    A store's call names its site with :attr:`site`, a word that emit replaces with the
    ``"path:line"`` of the statement it ends up on.  With ``debug_waits`` (seconds), each spinning
    call (:data:`calling.GIVING_UP`) calls the helper that gives up instead, with its site and deadline.
    """

    def __init__(
        self, strategy: str, words: set[str], prefix: str, renderer: Renderer, debug_waits: float | None = None
    ):
        self.strategy = strategy
        self.deadline_ns = None if debug_waits is None else str(round(debug_waits * 1e9))
        self.words = words
        self.taken = set(words)
        self.prefix = prefix
        self.site = prefix + SITE_WORD
        self.render = renderer
        self.helpers: set[str] = set()
        self._temporaries = itertools.count()
        self.passing = PassedLowering(self)
        self.bindings = BindingLowering(self)

    def use(self, use) -> list[str]:
        """The statements, or the one expression, that replace ``use``."""
        if isinstance(use, Binding):
            return self.stack(use).statements
        if isinstance(use, SliceAlias):
            return self.slice_alias(use)
        if isinstance(use, Load):
            return [self.load(use.access)]
        if isinstance(use, Store):
            return self.store(use)
        if isinstance(use, AugStore):
            return self.augmented_store(use)
        if isinstance(use, Reduction):
            return [self.reduction(use)]
        if isinstance(use, GuardedReduce):
            return [self.guarded_reduce(use)]
        if isinstance(use, MulticastParam):
            return [self.passing.parameters(use)]
        if isinstance(use, HelperCall):
            return [self.passing.call(use)]
        return self.call_on(use)

    def fresh(self, base: str) -> str:
        """A name no word of the module is, made from ``base``."""
        name = base
        while name in self.taken:
            name += "_"
        self.taken.add(name)
        return name

    def called(self, helper: str) -> str:
        """The name the module calls ``helper`` (named with ``HELPER_PREFIX``) by, recorded as called."""
        self.helpers.add(helper)
        return self.prefix + helper[len(HELPER_PREFIX) :]

    # -- bindings (lowered by :mod:`.lower_bindings`) ----------------------------------------

    def stack(self, binding: Binding) -> StackText:
        """The (cached) names and statements of one binding."""
        return self.bindings.stack(binding)

    def slice_alias(self, alias: SliceAlias) -> list[str]:
        """A table slice or entry bound to a plain name."""
        return self.bindings.slice_alias(alias)

    # -- indices -------------------------------------------------------------------------

    def _index_texts(self, access: Access, explicit: list[str], spans: bool = True) -> list[str]:
        """One text per element dim: the explicit indices (``explicit``: their texts), then what a trailing ``...``
        stands for (without ``spans``: 0)."""
        if not access.spans:
            return explicit
        r = len(access.spans)
        shape = self.stack(access.binding).shape
        assert shape is not None  # spans come from a binding's shape
        extents = shape[len(explicit) :]  # the spans' extents, as the binding holds them
        explicit = [i if i.isdigit() else f"{self.called(TRAILING)}({i}, {r})" for i in explicit]
        if not spans:
            return explicit + ["0"] * len(extents)
        return explicit + [f"{self.called(SPAN)}({n}, {d}, {r})" for d, n in enumerate(extents)]

    def _lower(self, access: Access) -> tuple[bool, ...] | None:
        """For each element dim, whether its bounds check ``i >= 0``: not where the index is proven non-negative
        (:mod:`.index_facts`; what a ``...`` stands for counts up from 0); ``None``: every dim's."""
        if len(access.nonnegative) != len(access.pure_indices):  # no facts (no jit function around)
            return None
        checked = tuple(not proven for proven in access.nonnegative) + (False,) * len(access.spans)
        return checked if not all(checked) else None

    def _split(self, access: Access, indices: list[str]) -> tuple[str, str] | None:
        """``base, offs``: the offsets of the index summands classed as scalars, for the buffer's pointer to take
        first, and of the others (``indices``: the explicit indices' texts, impure ones in fresh names: whole, with
        the others).  A dim whose index is all scalar goes to ``base`` whole; one that mixes scalar and tensor
        summands is split only without bounds (a binding without a shape, or an access whose mask proves its
        index inside: :mod:`.mask_bounds`; with bounds the mask needs the whole index in every lane, and the split
        measured slower: docs/perf-findings.md).  ``None`` where nothing goes to ``base``, or everything does,
        or for a ``remote=`` binding (its transfers take the whole offsets)."""
        if access.binding.remote is not None or len(access.summands) != len(indices):
            return None
        stack = self.stack(access.binding)
        scalars, tensors = [], []
        for d, text in enumerate(indices):
            scalar, tensor = access.summands[d]
            if access.pure_indices[d] and not tensor:
                scalars.append(text)
                tensors.append("0")
            elif access.pure_indices[d] and scalar and (stack.shape is None or access.mask_bounded):
                scalars.append(self._summed(scalar))
                tensors.append(self._summed(tensor))
            else:
                scalars.append("0")
                tensors.append(text)
        if all(t == "0" for t in scalars) or (all(t == "0" for t in tensors) and not access.spans):
            return None
        return split_offsets(
            tuple(self._index_texts(access, scalars, spans=False)),
            tuple(self._index_texts(access, tensors)),
            stack.shape,
            stack.strides,
        )

    def _summed(self, summands: list[tuple[int, cst.BaseExpression]]) -> str:
        """The text of a signed sum of index summands (``0`` for none)."""
        if len(summands) == 1 and summands[0][0] > 0:
            return self.render.text(summands[0][1])
        text = ""
        for sign, node in summands:
            term = self.render.atom(node)
            text += (" - " if text else "-") + term if sign < 0 else (" + " if text else "") + term
        return text or "0"

    def _where(self, access: Access, indices: list[str], pure: bool) -> tuple[str, str | None]:
        """``offs, bounds`` of an access: inline when the indices may repeat, else through the index helper; and the
        ``base`` for the helper's ``base=`` (see :meth:`_split`), if any (``indices``: the explicit ones' texts)."""
        stack = self.stack(access.binding)
        lower = self._lower(access)
        if pure:
            texts = tuple(self._index_texts(access, indices))
            split = self._split(access, indices)
            base, offs = split if split is not None else (None, offsets(texts, stack.shape, stack.strides))
            bounds: str | None
            if access.mask_bounded and stack.shape is not None:
                bounds = f"{self.called(UNBOUNDED)}({stack.shape[0]})"
            else:
                bounds = bounds_mask(texts, stack.shape, lower) if stack.shape is not None else None
            if (
                bounds is not None and stack.shape is not None and stack.shape_optional
            ):  # Triton evaluates one side of a constexpr condition
                bounds = f"({bounds}) if {stack.shape[0]} is not None else None"
            return f"{offs}, {bounds or 'None'}", base
        texts = tuple(self._index_texts(access, indices))
        extents = _tuple(stack.shape) if stack.shape is not None else "None"
        if stack.shape is not None and stack.shape_optional:
            extents = f"{extents} if {stack.shape[0]} is not None else None"
        steps = strides(stack.shape, stack.strides, len(texts))
        checked = f", {_tuple([str(c) for c in lower])}" if lower is not None and stack.shape is not None else ""
        return f"*{self.called(INDEX)}({_tuple(list(texts))}, {extents}, {_tuple(steps)}{checked})", None

    def _prefix(self, access: Access, where: str) -> str:
        stack = self.stack(access.binding)
        table = f", {stack.table}" if stack.table is not None else ""
        return f"{stack.src}, {stack.count}, {stack.smask}, {stack.example}, {where}{table}"

    def _route(self, access: Access) -> str:
        """How an access reaches its buffers (see :data:`calling.HELPERS`): the strategy, or ``remote``."""
        return "remote" if access.binding.remote is not None else self.strategy

    def _explicit(self, access: Access) -> list[str]:
        """The texts of the explicit indices, as written."""
        return [
            self.render.text(index.value)
            for index in (cst.ensure_type(e.slice, cst.Index) for e in access.subscript.slice)
            if not isinstance(index.value, cst.Ellipsis)
        ]

    def _access_prefix(self, access: Access) -> tuple[str, str | None]:
        """The stack and ``offs, bounds`` of an access inside an expression, and its ``base`` (see :meth:`_split`)."""
        where, base = self._where(access, self._explicit(access), access.pure)
        return self._prefix(access, where), base

    def _temporary(self, kind: str, text: str, statements: list[str]) -> str:
        """A fresh name (``_castpile_i0``: ``kind`` ``i``) that a statement appended to ``statements`` binds to ``text``."""
        name = self.fresh(f"{self.prefix}{kind}{next(self._temporaries)}")
        statements.append(f"{name} = {text}")
        return name

    def _hoisted_indices(self, access: Access, statements: list[str]) -> tuple[str, str | None]:
        """The stack and ``offs, bounds`` of an access in a statement, impure indices first put in fresh names; and
        its ``base``."""
        indices = self._explicit(access)
        for d, pure in enumerate(access.pure_indices):
            if not pure:
                indices[d] = self._temporary("i", indices[d], statements)
        where, base = self._where(access, indices, True)
        return self._prefix(access, where), base

    # -- accesses ------------------------------------------------------------------------

    def _call(self, helper: str, *args: str, **keywords: str | None) -> str:
        rendered = [*args, *(f"{key}={value}" for key, value in keywords.items() if value is not None)]
        return f"{self.called(helper)}({', '.join(rendered)})"

    def _align(self, access: Access) -> str | None:
        return self.stack(access.binding).align

    @staticmethod
    def _reordered(names: tuple[str, ...], positions: dict[str, int], impure: frozenset[str]) -> bool:
        """Whether the call wrote two or more value arguments with side effects in another order than
        the helper (whose value parameters are ``names``) takes them."""
        return sorted(impure, key=positions.__getitem__) != [name for name in names if name in impure]

    def _values(
        self, names: tuple[str, ...], given: dict[str, str], positions: dict[str, int], impure: frozenset[str]
    ) -> list[str]:
        """The value arguments by position, defaults filled in up to the last one given.

        Arguments with side effects written in another order than the helper takes them are
        evaluated in the order written and handed over rearranged
        (``*_castpile_in_order((b, a), (1, 0))``, defaults among them in their places).  That needs
        no ``None`` default among them (a jit function cannot return ``None``): only
        ``castpile.signal`` has one between two values (``wait_for``), and it is always a statement of
        its own, whose values :meth:`call_on` puts in fresh names instead.
        """
        last = max((k for k, name in enumerate(names) if name in given), default=-1)
        taken = names[: last + 1]
        if not self._reordered(names, positions, impure):
            return [given[name] if name in given else DEFAULTS[name] for name in taken]
        assert all(name in given or DEFAULTS[name] != "None" for name in taken), "a None default among reordered values"
        written = sorted((n for n in taken if n in given), key=positions.__getitem__)
        written += [name for name in taken if name not in given]  # defaults: literals, in any order
        order = tuple(str(written.index(name)) for name in taken)
        texts = [given[name] if name in given else DEFAULTS[name] for name in written]
        return [f"*{self.called(IN_ORDER)}({_tuple(texts)}, {_tuple(order)})"]

    def _arguments(self, call: cst.Call, positions: dict[str, int]) -> dict[str, str]:
        """The source of each argument of ``call`` by parameter name."""
        return {name: self.render.text(call.args[position].value) for name, position in positions.items()}

    def load(self, access: Access) -> str:
        """``bufs[idx]`` read as a value."""
        prefix, base = self._access_prefix(access)
        return self._call(HELPERS["load", self._route(access)], prefix, align=self._align(access), base=base)

    def store(self, use: Store) -> list[str]:
        """``bufs[idx] = value``: the value first, as Python evaluates it, then the indices."""
        statements: list[str] = []
        value = self.render.text(use.node.value)
        if not use.value_pure and not use.access.pure:
            value = self._temporary("v", value, statements)
        prefix, base = self._hoisted_indices(use.access, statements)
        store = HELPERS["store", self._route(use.access)]
        statements.append(self._call(store, prefix, value, align=self._align(use.access), base=base, site=self.site))
        return statements

    def augmented_store(self, use: AugStore) -> list[str]:
        """``bufs[idx] op= value``: the indices once, load, the value, op, store."""
        statements: list[str] = []
        prefix, base = self._hoisted_indices(use.access, statements)
        align = self._align(use.access)
        route = self._route(use.access)
        loaded = self._call(HELPERS["load", route], prefix, align=align, base=base)
        value = f"{loaded} {use.operator} {self.render.atom(use.node.value)}"
        statements.append(self._call(HELPERS["store", route], prefix, value, align=align, base=base, site=self.site))
        return statements

    def reduction(self, use: Reduction) -> str:
        """``tl.sum/max/min(bufs[idx], axis=0)``, ``tl.reduce(bufs[idx], 0, fn)``... (of a ``tl.load`` too, through
        elementwise steps) over the valid buffers only: a table's buffer by buffer under either strategy, a tile's
        through its P + I tensor.  ``tl.argmax/argmin`` are the positions of ``tl.max/min``'s ``return_indices=True``."""
        access = use.access
        given = self._arguments(use.load, use.load_positions) if use.load is not None else {}
        if access.binding.remote is not None:
            route = "remote"
        elif access.binding.param is not None:  # a table or a tile, whichever the caller passes
            route = "passed"
        else:
            route = "loop" if access.binding.table is not None else "gather"
        steps = operands = None
        if use.steps:
            steps = '"' + " ".join(step.kind for step in use.steps) + '"'
            texts = [self.render.text(step.operand) for step in use.steps if step.operand is not None]
            operands = _tuple(texts) if texts else None
        op = use.op
        options: dict[str, str | None] = {name: self.render.text(value) for name, value in use.options.items()}
        positions = op in ("argmax", "argmin")
        if positions:
            op = op[len("arg") :]
            tie = options.pop("tie_break_left", None)
            options = {"return_indices": "True", "return_indices_tie_break_left": tie, **options}
        prefix, base = self._access_prefix(access)
        call = self._call(
            HELPERS["reduce", route],
            prefix,
            f'"{op}"',
            *self._values(("mask", "other"), given, use.load_positions, use.load_impure),
            steps=steps,
            operands=operands,
            **options,
            **{key: given.get(key) for key in OPTIONS["load"]},
            align=self._align(access),
            base=base,
        )
        stacked = f"{call}[1]" if positions else call
        if use.axis is None:
            return stacked
        return f"({stacked} if {self.render.atom(use.axis)} == 0 else {self._loaded_reduction(use)})"

    def _loaded_reduction(self, use: Reduction) -> str:
        """The reduction as written, of its access loaded as P + I (masked-off and padded lanes 0 or ``other``):
        what Triton computes for an axis other than the stack's."""
        access = use.access
        operand: cst.BaseExpression
        if use.load is None:
            operand, loaded = access.subscript, self.load(access)
        else:
            load = CallOn(use.load, "load", access, use.load_positions, impure=use.load_impure)
            operand, [loaded] = use.load, self.call_on(load)
        mark = self.fresh(f"{self.prefix}operand")
        return re.sub(rf"\b{mark}\b", lambda _: loaded, self.render.text_with(use.node, {operand: mark}))

    def guarded_reduce(self, use: GuardedReduce) -> str:
        """A multi-operand ``tl.reduce`` of an access whose axis only Triton's compile knows: the reduction as
        written, under a condition that refuses it, naming the call's site, where the axis holds 0."""
        check = f'{self.called(OTHER_AXIS)}({self.render.text(use.axis)}, "{use.name}", {self.site})'
        return f"({self.render.text_with(use.node, {})} if {check} else None)"

    def call_on(self, use: CallOn) -> list[str]:
        """``tl.load/store/atomic_*``, ``castpile.signal/wait`` on an access (signal, wait: or on pointers).

        A call that stands alone as a statement, with value arguments that have side effects written
        in another order than the helper takes them, becomes several statements on its line: its
        impure indices (or wait's pointers), then those values in the order written, put in fresh
        names, then the helper's call.
        """
        op, access = use.op, use.access
        names = VALUE_PARAMS[op]
        given = self._arguments(use.node, use.positions)
        options = {key: given.get(key) for key in OPTIONS[op]}
        statements: list[str] = []
        impure = use.impure
        hoist = not use.result_used and self._reordered(names, use.positions, impure)
        base = None
        if access is None:  # castpile.signal or castpile.wait on plain pointers
            where = self.render.text(use.node.args[0].value)
            if hoist:
                where = self._temporary("p", where, statements)
        else:
            where, base = self._hoisted_indices(access, statements) if hoist else self._access_prefix(access)
        if hoist:
            for name in sorted(impure, key=use.positions.__getitem__):
                given[name] = self._temporary("v", given[name], statements)
            impure = frozenset()
        values = self._values(names, given, use.positions, impure)
        if op in ("signal", "wait"):
            options |= self._flag_checks(use)
        if access is None:
            helper, deadline = self._spin(
                WAIT_FLAGS if op == "wait" else SIGNAL_FLAGS, op == "wait" or "wait_for" in given
            )
            return [*statements, self._call(helper, where, *values, **(options | deadline))]
        keep_old = None if use.result_used else "False"
        route = self._route(access)
        if op in ATOMICS:
            call = self._call(
                HELPERS["atomic", route],
                where,
                f'"{op[len("atomic_") :]}"',
                *values,
                **options,
                align=self._align(access),
                base=base,
                keep_old=keep_old,
            )
        elif op == "atomic_cas":
            call = self._call(
                HELPERS["atomic_cas", route],
                where,
                *values,
                **options,
                align=self._align(access),
                base=base,
                keep_old=keep_old,
            )
        elif op == "store":
            call = self._call(
                HELPERS[op, route], where, *values, **options, align=self._align(access), base=base, site=self.site
            )
        else:  # signal, wait
            helper, deadline = self._spin(HELPERS[op, route], op == "wait" or "wait_for" in given)
            call = self._call(helper, where, *values, **(options | deadline), align=self._align(access), base=base)
        return [*statements, call]

    def _flag_checks(self, use: CallOn) -> dict[str, str | None]:
        """The keywords a signal's or wait's helper takes beside the user's: ``keep=True`` where a wait's value is
        used; the call's ``site`` where Triton's compile checks option values (:attr:`CallOn.checked`), and for a
        wait with ``decrement=``, ``written``: whether ``cmp=`` and ``reset=`` are written (a counting wait takes
        neither; a comparison left out is not ``"ge"`` to the helper)."""
        keywords: dict[str, str | None] = {"keep": "True" if use.op == "wait" and use.result_used else None}
        if use.checked:
            keywords["site"] = self.site
            written = [keyword for keyword in ("cmp", "reset") if keyword in use.positions]
            if "decrement" in use.positions and written:
                keywords["written"] = f'"{" ".join(written)}"'
        return keywords

    def _spin(self, helper: str, spins: bool) -> tuple[str, dict[str, str]]:
        """``helper``, or in debug mode, where the call ``spins``, the one that gives up, and its keywords."""
        if self.deadline_ns is None or not spins or helper not in GIVING_UP:
            return helper, {}
        return GIVING_UP[helper], {"site": self.site, "deadline_ns": self.deadline_ns}
