"""``python -m castpile`` and the ``castpile`` command (:func:`main`): the command line (see :mod:`castpile.cli`).

``SRC -o OUT`` (or ``-o OUT SRC``) with a regular file SRC that never mentions
castpile is a copy, done here before :mod:`castpile.cli` is even compiled.  Only
a copy that fully succeeds is done here; anything else (other arguments, a SRC
that uses castpile, an OUT that exists but is no regular file, any error) goes to
:func:`castpile.cli.main`, which starts the run over and reports as always.
Nothing half-written is left behind meanwhile: :func:`~castpile.files.write_outputs`,
as for the full run, either renames a whole file into place or removes its
temporary file.
"""

import os
import stat
import sys

from .files import MAX_SOURCE_BYTES, write_outputs
from .plain_args import mentions_castpile, plain_form


def _copied(argv: list[str]) -> bool:
    """Whether ``argv`` asked for a plain SRC to be transpiled to OUT, and OUT now holds its bytes."""
    plain = plain_form(argv)
    if plain is None:
        return False
    src, out = plain
    if out is None or src == "-":
        return False
    try:
        with open(src, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_SOURCE_BYTES:
                return False  # a pipe or device could not be read again by the full run
            data = f.read(MAX_SOURCE_BYTES + 1)
        if len(data) > MAX_SOURCE_BYTES or mentions_castpile(data):
            return False
        try:
            target = os.stat(out)
        except FileNotFoundError:
            target = None
        if target is not None and (not stat.S_ISREG(target.st_mode) or os.path.samestat(st, target)):
            return False  # a directory or SRC itself (refused), a FIFO or device (written through once)
        write_outputs([(out, data)])
    except OSError:
        return False
    return True


def main() -> int:
    """The ``castpile`` command: the plain copy above when it applies, else :func:`castpile.cli.main`."""
    argv = sys.argv[1:]
    try:
        if _copied(argv):
            return 0
    except KeyboardInterrupt:
        return 130
    from .cli import main as full_run

    return full_run(argv)


if __name__ == "__main__":
    sys.exit(main())
