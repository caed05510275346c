"""Loaded by Python at start-up only where a test puts this folder on ``PYTHONPATH``: it lets a
test interrupt a ``gemma4`` command at a chosen point of its real work, without guessing a time
(tests/test_every_command.py's Ctrl-C test).

``GEMMA4_TEST_PAUSE_AT`` is ``EVENT:TEXT``: the first audit event ``EVENT`` (``open``,
``import``, ``socket.connect``, ...) whose arguments, as text, contain ``TEXT``. There the
process creates the file ``GEMMA4_TEST_PAUSED`` names and waits inside that call until a signal
ends the wait: the test sends SIGINT once the file exists, so the interrupt lands in the
command's own code at that point, on any machine, idle or loaded. It waits only where SIGINT
would raise: Python runs signal handlers in the main thread alone, and asyncio's runner turns
SIGINT into a cancellation its event loop must be free to carry out; so a point reached in
another thread or inside an event loop is marked and not waited at (choose there a point the
command then waits at by itself: a connection to a server that never answers). Only the process
the test started pauses (not one it starts in turn). Without both variables this file does
nothing.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

_AT = os.environ.get("GEMMA4_TEST_PAUSE_AT", "")
_MARKER = os.environ.get("GEMMA4_TEST_PAUSED", "")
_ROOT_PID = "GEMMA4_TEST_PAUSE_PID"


def _raises_here() -> bool:
    """Whether SIGINT, arriving now, raises in this thread (and so ends a wait here)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    handler = signal.getsignal(signal.SIGINT)
    asyncio = sys.modules.get("asyncio")
    # asyncio.Runner.run installs functools.partial(runner._on_sigint, main_task=...).
    owner = getattr(getattr(handler, "func", handler), "__self__", None)
    return not (asyncio is not None and isinstance(owner, asyncio.Runner)) and callable(handler)


def _install() -> None:
    event, sep, text = _AT.partition(":")
    if not (sep and event and text and _MARKER):
        return
    if os.environ.setdefault(_ROOT_PID, str(os.getpid())) != str(os.getpid()):
        return  # a process the command started: it runs on
    reached = False

    def hook(name: str, args: tuple[object, ...]) -> None:
        nonlocal reached
        if reached or name != event or text not in " ".join(map(str, args)):
            return
        reached = True
        with open(_MARKER, "w"):  # its own "open" event returns at once: `reached` is set
            pass
        if not _raises_here():
            return
        # Until a signal's handler raises (SIGINT: KeyboardInterrupt, here). In short sleeps:
        # the kernel may hand the signal to another thread of the process (a library's), and
        # then nothing wakes this one; Python runs the handler here at its next step.
        while True:
            time.sleep(0.05)

    sys.addaudithook(hook)


_install()
