"""The Triton helpers that lowered multicast accesses call, by family.

Each module of this package is real Triton (it imports and runs as it is) and,
function by function, is copied after the last line of every transpiled module
(only the helpers a module uses, with the helpers they call, whichever family
they are in): :mod:`.common` (offsets, masks, atomics), :mod:`.reduction` (a
reduction's steps and fold), :mod:`.loop`, :mod:`.gather`, :mod:`.passed` (through a
Multicast parameter), :mod:`.remote` and :mod:`.deadlines` (the waits of debug mode,
``CASTPILE_DEBUG_WAITS``, which give up at a deadline).
The compiler never imports them: :mod:`castpile.compiler.emit` reads their text.

Every access helper takes the *stack* first, in one of two forms that castpile's
binding produces:

* table form: ``src`` is a pointer to ``count`` int64 addresses (the sugar
  ``table[lo:hi]``, with ``lo`` already added), ``smask`` is ``None`` or the
  ``ptr_mask``, a boolean tensor of the padded extent (or a scalar) marking valid entries;
* tile form: ``src`` is an integer tensor of addresses of any rank P (rank 0:
  one buffer, P = (), as for one peer ``table[r]``, whose address the binding loaded),
  ``count`` is ``src.numel`` (1 for ``table[r]``) and ``smask`` is ``None`` or a
  boolean tensor of the same shape marking valid entries.

then ``example`` (a pointer whose element type the buffers have; for a dtype example,
:func:`~.common._castpile_typed` made it), ``offs`` (the
element offsets, shape I) and ``bounds`` (the bounds mask, shape I, or ``None``),
then the arguments of the user's call in the contract's order, the user's ``mask``
among them.  Results have shape P + I, with P padded to powers of two; padded or
masked entries are never read or written.  P + I may be ``()``, and a mask may be a
tensor, a scalar or a ``tl.constexpr`` bool: Triton compiles a scalar as a scalar (the
interpreter runs it as a NumPy array), so no helper reduces one (``tl.sum`` of a scalar
does not compile).  An access whose indices must be
evaluated once passes ``*_castpile_index(indices, extents, strides)`` for
``offs, bounds``.  An access whose index has scalar dims passes their share of the
offsets as ``base=`` (every access helper of the loop and gather families takes it):
each buffer's pointer is advanced by it before ``offs`` is added
(:func:`~.common._castpile_rebased`; a ``base`` that is no scalar joins ``offs`` instead).

``_loop`` helpers walk the stack one buffer at a time; ``_gather`` helpers build
the whole P + I pointer tensor and issue one memory operation; ``_remote`` helpers
walk a ``remote="nvshmem"`` table, reaching remote buffers through NVSHMEM.
"""
