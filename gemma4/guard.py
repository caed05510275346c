"""The edges every `gemma4` command shares, in one place (docs/commands.md, "At the edges"):
unwritable output, Ctrl-C, input that is not UTF-8, an unwritable stderr, and a last resort
for any other exception (one line; ``GEMMA4_DEBUG=1`` shows the traceback).
:class:`OutputError` is a ``BaseException`` so that no command's ``except OSError`` mistakes
it for its own failure."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import FrameType
from typing import Any, TextIO, cast

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
"""As a shell reports a command ended by SIGINT (128 + 2)."""
EXIT_PIPE = 141
"""As a shell reports a command ended by SIGPIPE (128 + 13)."""

MAX_SHOWN_CHARS = 80
"""How much of a refused value a message quotes."""

_interrupted = threading.Event()


class OutputError(BaseException):
    """Standard output cannot be written; carries the ``OSError``."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error)
        self.error = error


class ReaderGone(OutputError):
    """The reader of standard output left (EPIPE): not an error the user needs told."""


def shown(value: str, limit: int = MAX_SHOWN_CHARS) -> str:
    """``value`` quoted for a message: an undecodable byte as ``\\xff``, a control character
    escaped, cut to ``limit`` characters."""
    try:
        raw = value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate that is no escaped byte
        raw = value.encode("utf-8", "backslashreplace")
    decoded = raw.decode("utf-8", "backslashreplace")
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in decoded)
    if len(text) > limit:
        text = f"{text[: limit - 20]}... ({len(value)} characters)"
    return f"'{text}'"


def _undecodable(text: str) -> bool:
    # os.fsdecode keeps a byte that is not UTF-8 as a lone surrogate U+DC80..U+DCFF.
    return any("\udc80" <= ch <= "\udcff" for ch in text)


def undecodable_input(argv: Sequence[str], environ: Mapping[str, str]) -> str | None:
    """Why the command cannot run on this input (an argument or an environment variable that
    is not UTF-8), naming it; None when every byte decodes."""
    for index, arg in enumerate(argv):
        if not _undecodable(arg):
            continue
        option, has_value, _ = arg.partition("=")
        if arg.startswith("--") and has_value and not _undecodable(option):
            what = f"the value of {option}"
        elif index > 0 and argv[index - 1].startswith("-") and not _undecodable(argv[index - 1]):
            what = f"the value of {argv[index - 1]}"
        else:
            what = f"argument {index + 1}"
        return f"{what} ({shown(arg)}) is not valid UTF-8; pass it as UTF-8 text"
    for name, value in environ.items():
        if _undecodable(name):
            return f"an environment variable's name ({shown(name)}) is not valid UTF-8"
        if _undecodable(value):
            # Its value is not shown: it may be a key.
            return (
                f"environment variable {shown(name)[1:-1]} is not valid UTF-8; set it to "
                "UTF-8 text or unset it"
            )
    return None


def _silence(fd: int) -> None:
    """Point ``fd`` at /dev/null, so that what is still buffered for it flushes quietly when
    the interpreter exits (instead of 'Exception ignored ... BrokenPipeError')."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.dup2(devnull, fd)
    finally:
        os.close(devnull)


class _Stdout:
    """Standard output whose write and flush failures become :class:`OutputError`."""

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner

    def _guard(self, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except BrokenPipeError as exc:
            raise ReaderGone(exc) from None
        except OSError as exc:
            raise OutputError(exc) from None
        except ValueError as exc:  # "I/O operation on closed file"
            raise OutputError(OSError(errno.EBADF, str(exc))) from None

    def write(self, text: str) -> int:
        return cast(int, self._guard(lambda: self._inner.write(text)))

    def writelines(self, lines: Iterable[str]) -> None:
        self._guard(lambda: self._inner.writelines(lines))

    def flush(self) -> None:
        self._guard(self._inner.flush)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _Stderr:
    """Standard error whose failures are given up quietly (there is nowhere left to say so)."""

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner
        self._broken = False

    def _attempt(self, call: Callable[[], object]) -> None:
        if self._broken:
            return
        try:
            call()
        except (OSError, ValueError):
            self._broken = True
            with contextlib.suppress(OSError, ValueError):
                _silence(self._inner.fileno())

    def write(self, text: str) -> int:
        self._attempt(lambda: self._inner.write(text))
        return len(text)

    def flush(self) -> None:
        self._attempt(self._inner.flush)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    _interrupted.set()
    raise KeyboardInterrupt


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _say(prog: str, text: str) -> None:
    print(f"{prog}: {text}", file=sys.stderr)  # never None once _install ran


@contextlib.contextmanager
def interrupts_win() -> Iterator[None]:
    """Within: Ctrl-C is noted as well as raised, for code that may swallow a KeyboardInterrupt
    and fail another way (only Python's default handler is replaced: asyncio's runner and an
    ignored SIGINT are kept). When it came, the block ends in ``KeyboardInterrupt`` whatever it
    did after: raised another exception (the Pulumi program's import cut short fails as "has no
    attribute", then as a refused stack) or returned a result built on the cut-short work. The
    input is not to blame; the command exits 130."""
    before = _interrupted.is_set()
    replace = (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    )
    previous = signal.signal(signal.SIGINT, _on_sigint) if replace else None
    try:
        yield
    except Exception:
        if _interrupted.is_set() and not before:
            raise KeyboardInterrupt from None
        raise
    finally:
        if replace:
            signal.signal(signal.SIGINT, previous)
    if _interrupted.is_set() and not before:
        raise KeyboardInterrupt


def _install() -> None:
    """Wrap stdout and stderr (once)."""
    if sys.stderr is None:  # closed: messages must not fall through to stdout
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process
    if not isinstance(sys.stderr, _Stderr):
        sys.stderr = cast(TextIO, _Stderr(sys.stderr))
    if sys.stdout is not None and not isinstance(sys.stdout, _Stdout):
        sys.stdout = cast(TextIO, _Stdout(sys.stdout))


def _outcome(prog: str, exc: BaseException) -> int:
    """The exit status for what ended a command, with its one line said."""
    leaves = _leaves(exc)
    if any(isinstance(e, KeyboardInterrupt) for e in leaves):
        _interrupted.set()
    if _interrupted.is_set():
        _say(prog, "interrupted")
        return EXIT_INTERRUPTED
    # A write straight to the buffer (the MCP stdio transport) fails as BrokenPipeError.
    gone = [
        ReaderGone(e) if isinstance(e, BrokenPipeError) else e
        for e in leaves
        if isinstance(e, OutputError | BrokenPipeError)
    ]
    if gone:
        _silence(1)
        if all(isinstance(e, ReaderGone) for e in gone):
            return EXIT_PIPE
        error = next(e for e in gone if not isinstance(e, ReaderGone)).error
        _say(prog, f"error: cannot write the output: {error.strerror or error}")
        return EXIT_FAILED
    first = leaves[0]
    if isinstance(first, SystemExit):
        code = first.code
        return code if isinstance(code, int) else (0 if code is None else EXIT_USAGE)
    if os.environ.get("GEMMA4_DEBUG") == "1":
        raise exc
    if isinstance(first, OSError):
        where = f" ({first.filename})" if first.filename else ""
        _say(prog, f"error: {first.strerror or first}{where}")
        return EXIT_FAILED
    _say(
        prog,
        f"internal error: {type(first).__name__}: {first} (GEMMA4_DEBUG=1 shows the traceback)",
    )
    return EXIT_FAILED


def run_guarded(
    prog: str,
    body: Callable[[], int | None],
    argv: Sequence[str],
    environ: Mapping[str, str] | None = None,
) -> int:
    """Run ``body`` (a command's ``main``) as :mod:`this module <gemma4.guard>` describes;
    ``argv`` is checked for undecodable bytes first, with ``environ`` (default: the process's).
    Returns the exit status."""
    _install()
    _interrupted.clear()
    problem = undecodable_input(argv, os.environ if environ is None else environ)
    if problem:
        _say(prog, f"error: {problem}")
        return EXIT_USAGE
    if sys.stdout is None:
        _say(prog, "error: standard output is closed; nothing could be written")
        return EXIT_FAILED
    try:
        code = int(body() or 0)
        sys.stdout.flush()
    except BaseException as exc:  # the one place that handles them all
        return _outcome(prog, exc)
    if _interrupted.is_set():
        _say(prog, "interrupted")
        return EXIT_INTERRUPTED
    return code
