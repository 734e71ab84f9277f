"""The command line: ``castpile SRC [-o OUT] [--diff | --check] [--strategy loop|gather] [--debug-waits SECONDS]``,
and its subcommands.

``castpile run SCRIPT [ARGS...]`` runs a script, a zipapp or a directory (``castpile run -m MODULE`` a module), as
``python`` would but transpiled (:mod:`castpile.runner`); ``castpile show
MODULE_OR_FILE [--diff]`` prints what castpile makes of a module or file; ``castpile cache
info|clear`` manages the import hook's cache (:mod:`castpile.cache`).  A first argument
``run``, ``show`` or ``cache`` is always the subcommand: a file of that name is ``./run``.

Exit status: 0 success, 1 diagnostics in the input, 2 usage and I/O errors (a
failed write to stdout included: ``castpile: cannot write to stdout: REASON``),
3 an internal error (a castpile bug: please report it); ``castpile run`` exits with
the script's status.

Without ``-o``, or with ``-o -``, the output goes to stdout.  ``--diff -o OUT``
both writes OUT and prints the diff.  A failed run never creates or overwrites
OUT: outputs go to temporary files, renamed into place only once every SRC has
transpiled and every output is staged, all of them or none (see
:func:`castpile.files.write_outputs`).  An OUT that is a FIFO or device is written
through, never replaced.  No SRC is ever an OUT, however reached (links
followed).  SRC is only ever read, and at most :data:`MAX_SOURCE_BYTES` of it.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Sequence

from .files import MAX_SOURCE_BYTES, write_outputs
from .options import DEBUG_WAITS_ENV, STRATEGIES, VERSION, check_debug_waits, debug_waits_from_env, mentions_castpile
from .plain_args import plain_form

# Only what every run needs is imported here: a file without castpile should cost
# about what copying it costs.  ``castpile SRC [-o OUT]`` is recognised without
# argparse (castpile/plain_args.py), and a SRC that never mentions castpile is written
# back as it is without importing the transpiler (castpile.compiler: not even its
# package); argparse, the transpiler and its errors, libcst, sympy, difflib and
# traceback load on demand.  The ``castpile`` command and ``python -m castpile`` copy
# such a file before this module is even compiled (castpile/__main__.py).


_EPILOG = """\
subcommands:
  castpile run [--strategy S] SCRIPT [ARGS...]   run SCRIPT as __main__, transpiled, with the
                                                 import hook on for the modules in its directory
                                                 (SCRIPT: a .py file, a zipapp or a directory)
  castpile run [--strategy S] -m MODULE [ARGS...]
                                                 run MODULE as python -m does, transpiled
  castpile show MODULE_OR_FILE [--diff]          print the transpiled source (or the diff)
  castpile cache info | clear [--dir DIR]        list (with its bound, $CASTPILE_CACHE_MAX_MB) or
                                                 empty the import hook's cache
  (a file named run, show or cache: write ./run)

exit status:
  0  success
  1  diagnostics in the input (located: path:line:col: error: message)
  2  usage or I/O error (a failed write to stdout too)
  3  internal error: a bug in castpile, please report it
  castpile run exits with the script's status: sys.exit's code, 1 for an uncaught
  exception or a castpile diagnostic, 130 on Ctrl-C (2 when SCRIPT cannot be read,
  3 when castpile fails on it; 2 when MODULE cannot be found)
"""


class _Usage(Exception):
    """A usage error: message for stderr, exit 2."""


def _parser():
    import argparse

    p = argparse.ArgumentParser(
        prog="castpile",
        description="Transpile Triton kernels that use castpile multicast tensors into plain Triton.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_EPILOG,
    )
    p.add_argument("sources", nargs="+", metavar="SRC", help="input .py files, or - for stdin")
    p.add_argument(
        "-o", "--output", metavar="OUT", help="output file (one SRC) or directory (several SRC); - for stdout"
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--diff", action="store_true", help="print a unified diff input -> output (and write any OUT)")
    mode.add_argument("--check", action="store_true", help="diagnose only; write nothing")
    p.add_argument("--strategy", choices=STRATEGIES, default="loop", help="lowering of accesses (default: loop)")
    p.add_argument(
        "--debug-waits",
        metavar="SECONDS",
        help=f"waits give up after SECONDS and record their line (default: ${DEBUG_WAITS_ENV}, else never)",
    )
    p.add_argument("--version", action="version", version=f"castpile {VERSION}")
    return p


def _read(src: str) -> bytes:
    if src == "-":
        if sys.stdin is None:  # started with stdin closed
            raise _Usage("cannot read stdin: it is closed")
        return _capped(sys.stdin.buffer, "<stdin>")
    try:
        if os.path.isdir(src):
            raise _Usage(f"{src}: is a directory, not a Python file")
        with open(src, "rb") as f:
            return _capped(f, src)
    except FileNotFoundError:
        raise _Usage(f"{src}: no such file") from None
    except OSError as exc:
        raise _Usage(f"{src}: cannot read: {exc.strerror or exc}") from None


def _capped(stream, name: str) -> bytes:
    """All of ``stream``, unless it holds more than :data:`MAX_SOURCE_BYTES`."""
    data = stream.read(MAX_SOURCE_BYTES + 1)
    if len(data) > MAX_SOURCE_BYTES:
        raise _Usage(f"{name}: larger than {MAX_SOURCE_BYTES // (1024 * 1024)} MiB; castpile refuses it")
    return data


def _targets(sources: list[str], output: str | None) -> Sequence[str | None]:
    """Where each SRC's output goes: a path, or None for stdout (no ``-o``, or ``-o -``)."""
    if output is None or output == "-":
        return [None] * len(sources)
    if len(sources) > 1:
        if not os.path.isdir(output):
            raise _Usage(f"{output}: with several SRC, -o must name an existing directory")
        if "-" in sources:
            raise _Usage("- (stdin) can only be transpiled alone")
        targets = [os.path.join(output, os.path.basename(s)) for s in sources]
        if len({os.path.basename(t) for t in targets}) < len(targets):
            raise _Usage("several SRC share a file name; their outputs in one -o directory would collide")
    else:
        if os.path.isdir(output):
            raise _Usage(f"{output}: is a directory; give a file name, or several SRC")
        parent = os.path.dirname(output)
        if parent and not os.path.isdir(parent):
            raise _Usage(f"{output}: directory {parent} does not exist")
        targets = [output]
    inputs = {_identity(src): src for src in sources if src != "-"}
    inputs.pop(None, None)  # SRC that do not exist, which _read reports
    for target in targets:
        src = inputs.get(_identity(target))
        if src is not None:
            raise _Usage(f"{target}: is the input file {src} itself; castpile never overwrites its input")
    return targets


def _identity(path: str) -> tuple[int, int] | None:
    """The file that ``path`` reaches, links followed, as (device, inode); None where there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _debug_waits(option: str | None) -> dict[str, float]:
    """The ``debug_waits`` transpile option: ``--debug-waits``'s, else :data:`DEBUG_WAITS_ENV`'s, else none."""
    try:
        if option is not None:
            return {"debug_waits": check_debug_waits(option, "--debug-waits")}
        return debug_waits_from_env()
    except ValueError as exc:
        raise _Usage(str(exc)) from None


def _run(
    sources: list[str], output: str | None, *, strategy="loop", check=False, diff=False, debug_waits=None
) -> tuple[int, bytes]:
    """Transpile every SRC: (exit status, what to print).  OUT is written only once every SRC has transpiled."""
    options = {"strategy": strategy, **_debug_waits(debug_waits)}
    targets = _targets(sources, output)
    status = 0
    results = []
    for src, target in zip(sources, targets):
        data = _read(src)
        name = "<stdin>" if src == "-" else src
        if not mentions_castpile(data):  # what the compiler would give back, without loading it
            results.append((name, data, data, target))
            continue
        from .compiler import transpile_source
        from .compiler.errors import TranspileError

        try:
            out = transpile_source(data, name, **options)
        except TranspileError as exc:
            print(exc.render(), file=sys.stderr)
            status = 1
            continue
        except Exception as exc:
            raise _Internal(name) from exc
        results.append((name, data, out, target))
    if status or check:
        return status, b""
    try:
        write_outputs([(target, out) for _, _, out, target in results if target is not None])
    except OSError as exc:
        raise _Usage(f"{exc.filename}: cannot write: {exc.strerror or exc}") from None
    if diff:
        return 0, b"".join(_diff(name, data, out) for name, data, out, _ in results)
    return 0, b"".join(out for _, _, out, target in results if target is None)


class _Internal(Exception):
    """An unexpected exception while transpiling the file ``args[0]``."""


def _diff(name: str, before: bytes, after: bytes) -> bytes:
    import difflib

    a = before.decode("utf-8", errors="replace").splitlines(keepends=True)
    b = after.decode("utf-8", errors="replace").splitlines(keepends=True)
    return "".join(difflib.unified_diff(a, b, name, f"{name} (castpile)")).encode("utf-8", "surrogateescape")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``castpile`` command; returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    # argparse (here and in `castpile cache`) would swallow an error writing --help
    # or --version to stdout: what they print is captured, and written by _print.
    captured = io.StringIO()
    if argv[:1] == ["run"]:
        from .runner import run_main

        return run_main(argv[1:])
    if argv[:1] == ["show"]:
        return _print(*_show_main(argv[1:]))
    if argv[:1] == ["cache"]:
        from .cache import cache_main

        with contextlib.redirect_stdout(captured):
            status = cache_main(argv[1:])
        return _print(captured.getvalue().encode(), status)
    plain = plain_form(argv)
    if plain is not None:
        sources, output, options = [plain[0]], plain[1], {}
    else:
        try:
            with contextlib.redirect_stdout(captured):
                args = _parser().parse_args(argv)
        except SystemExit as exc:
            return _print(captured.getvalue().encode(), int(exc.code or 0))
        sources, output = args.sources, args.output
        options = {"strategy": args.strategy, "check": args.check, "diff": args.diff, "debug_waits": args.debug_waits}
    try:
        status, printed = _run(sources, output, **options)
    except _Usage as exc:
        print(f"castpile: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except _Internal as exc:
        from .reporting import report_internal_error

        return report_internal_error(exc.args[0], exc.__cause__ or exc)  # raised from the failure it reports
    except Exception as exc:
        from .reporting import report_internal_error

        return report_internal_error(", ".join(sources), exc)
    return _print(printed, status)


def _show_main(argv: list[str]) -> tuple[bytes, int]:
    """``castpile show MODULE_OR_FILE [--diff] [--strategy S]``: what to print (what castpile makes of it)
    and the exit status."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="castpile show",
        description="Print the transpiled source of a file, or of a module as the import hook transpiles it "
        "(a module's parent packages are imported to find it, from the current directory as `python -m` does).",
    )
    parser.add_argument("target", metavar="MODULE_OR_FILE", help="a .py file, or a dotted module name")
    parser.add_argument("--diff", action="store_true", help="print a unified diff source -> transpiled instead")
    parser.add_argument("--strategy", choices=STRATEGIES, help="lowering of accesses (default: the hook's, else loop)")
    captured = io.StringIO()
    try:
        with contextlib.redirect_stdout(captured):
            args = parser.parse_args(argv)
    except SystemExit as exc:
        return captured.getvalue().encode(), int(exc.code or 0)
    from .compiler import transpile_source
    from .compiler.errors import TranspileError

    try:
        path, options = _shown(args.target)
        data = _read(path)
        if args.strategy:
            options["strategy"] = args.strategy
        out = transpile_source(data, path, **options)
    except _Usage as exc:
        print(f"castpile show: error: {exc}", file=sys.stderr)
        return b"", 2
    except TranspileError as exc:
        print(exc.render(), file=sys.stderr)
        return b"", 1
    return (_diff(path, data, out) if args.diff else out), 0


def _shown(target: str) -> tuple[str, dict]:
    """The source file of ``target`` (a file, or a module found through ``sys.path`` and the hook) and the
    options its hook transpiles it with (where no hook does: ``loop``, and :data:`DEBUG_WAITS_ENV`)."""
    if target.endswith(".py") or os.sep in target or os.path.isfile(target):
        return target, {"strategy": "loop", **_debug_waits(None)}
    import importlib.util

    from .hook import hooked_options

    sys.path.insert(0, os.getcwd())
    try:
        with contextlib.redirect_stdout(sys.stderr):  # what importing its packages prints is not the output
            spec = importlib.util.find_spec(target)
    except Exception as exc:  # a parent package that fails to import, a bad name
        raise _Usage(f"{target}: cannot find this module: {type(exc).__name__}: {exc}") from None
    if spec is None:
        raise _Usage(f"{target}: no such file or module")
    origin = spec.origin
    if not spec.has_location or origin is None or not origin.endswith(".py"):
        raise _Usage(f"{target}: has no Python source file (found {origin})")
    options = hooked_options(spec)
    if options is None:
        print(
            f"castpile show: note: no import hook takes {target}; showing what `castpile {spec.origin}` writes",
            file=sys.stderr,
        )
    return origin, dict(options) if options is not None else {"strategy": "loop", **_debug_waits(None)}


def _print(data: bytes, status: int) -> int:
    """Write ``data`` to stdout, after whatever is buffered there; ``status``, or 2 if stdout fails."""
    if sys.stdout is None:  # started with stdout closed
        if data:
            print("castpile: cannot write to stdout: it is closed", file=sys.stderr)
            return 2
        return status
    try:
        sys.stdout.flush()
        view = memoryview(data)
        while view:  # a file-size limit cuts a write short, and only the next one fails
            written = sys.stdout.buffer.write(view)
            view = view[written:]
        sys.stdout.flush()
    except BrokenPipeError:
        sys.stderr.close()  # the reader went away: nothing left to tell
        return 2
    except OSError as exc:
        print(f"castpile: cannot write to stdout: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return status
