"""Other spellings of the 1-D row loops of row_bodies.py, made as text edits of a castpile kernel and its hand twin alike.

The idioms users write around a stacked row reduction that the mask rule proves (docs/language.md, "What castpile
emits for an index"), and Triton's own pipelining of the loop, which is no idiom of castpile's::

    >>> text = '''@triton.jit
    ... def k(ex, M, D):
    ...     \"\"\"doc\"\"\"
    ...     for row in range(tl.program_id(0), M, tl.num_programs(0)):
    ...         h = tl.load(ex + row * D + cols)
    ... '''
    >>> print(idiom_source(function(text, "k"), IDIOMS["row offset named"], "i0"))
    @triton.jit
    def k_i0(ex, M, D):
        \"\"\"doc\"\"\"
        for row in range(tl.program_id(0), M, tl.num_programs(0)):
            start = row * D
            h = tl.load(ex + start + cols)
    <BLANKLINE>

tests/test_index_rule.py compiles each idiom of :data:`IDIOMS` for sm_90 against its hand twin;
benchmarks/sweeps/sweep_row_idioms.py times them, and :data:`PIPELINED`, on one GPU.
"""

LOOP_HEAD = "for row in range(tl.program_id(0), M, tl.num_programs(0)):"
#: idiom -> its edits: (old, new) or (old, new, count) replacements in a kernel's body.
IDIOMS = {
    "row offset named": (("row * D + cols", "start + cols"), ("    h = ", "    start = row * D\n        h = ", 1)),
    "int64 row offset": (("row * D", "row.to(tl.int64) * D"),),
    "hinted lanes": (
        ("tl.arange(0, BLOCK_D)", "tl.max_contiguous(tl.multiple_of(tl.arange(0, BLOCK_D), BLOCK_D), BLOCK_D)"),
    ),
    "row guarded by if": ((LOOP_HEAD, "row = tl.program_id(0)\n    if row < M:"),),
    "tl.range with step=": (
        (LOOP_HEAD, LOOP_HEAD.replace("range(", "tl.range(").replace(", tl.num_", ", step=tl.num_")),
    ),
}
#: The loop handed to Triton's software pipeliner (``tl.range(..., num_stages=n)``: cp.async into shared memory).
PIPELINED = {
    f"num_stages={n}": ((LOOP_HEAD, LOOP_HEAD.replace("range(", "tl.range(").replace("):", f", num_stages={n}):")),)
    for n in (2, 3)
}


def function(text: str, name: str) -> str:
    """The source of the jit function ``name`` in ``text``, its decorator included."""
    start = text.index(f"@triton.jit\ndef {name}(")
    end = text.find("\n\n\n", start)
    return text[start : end if end != -1 else len(text)].rstrip() + "\n"


def idiom_source(source: str, edits, suffix: str) -> str:
    """``source`` (one :func:`function`) renamed ``<name>_<suffix>``, with the edits made in its body after the
    docstring (a replacement's ``count``: its first matches only)."""
    head, _, body = source.partition('"""\n')
    head, _, doc = head.rpartition("\n")
    head = head.replace("(", f"_{suffix}(", 1)
    for old, new, *count in edits:
        if old not in body:
            raise ValueError(f"{old!r} is not in the body of {head!r}")
        body = body.replace(old, new, *count)
    return f'{head}\n{doc}"""\n{body}'
