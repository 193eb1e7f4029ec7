"""Ctrl-C on the command line: an exit at once while a command loads, then a KeyboardInterrupt its work handles.

While a command loads (its modules, torch and Triton behind them) and reads its input, Ctrl-C ends it with one line
and exit status 130 at once (``exiting_at_once``): nothing is there to keep yet. A KeyboardInterrupt raised then
would land in the middle of an import, where it can be swallowed by C code and leave one of the import system's
module locks held, so that a later import of that module from another thread waits forever (a `geak optimize`
interrupted half a second after it started hung so, its main thread waiting on that thread). From the moment its
work is under way (``work_under_way``), Ctrl-C is a KeyboardInterrupt the command handles, keeping what it finished;
inside ``asyncio.run`` the first one cancels the main task instead (``run_work``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

from .exits import EXIT_INTERRUPTED

T = TypeVar("T")


@contextlib.contextmanager
def exiting_at_once() -> Iterator[None]:
    """Inside, Ctrl-C ends the process at once (unless it was ignored, as in a shell's background job); after, it is
    handled as it was before."""
    inherited = signal.getsignal(signal.SIGINT)
    if inherited is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, _exit_at_once)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, inherited)


def work_under_way() -> None:
    """The command's work starts: from here Ctrl-C is a KeyboardInterrupt, where it was an exit at once."""
    if signal.getsignal(signal.SIGINT) is _exit_at_once:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def run_work(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)``. A Ctrl-C that lands before the loop has started `main` (while it is being made) closes
    `main` unstarted, so that the command's last line is its own, not Python's "coroutine ... was never awaited"."""
    try:
        return asyncio.run(main)
    except BaseException:
        main.close()  # a no-op where it ran
        raise


def _exit_at_once(signum: int, frame: object) -> None:
    """One line and exit 130 at once. A SystemExit raised in the middle of a third-party import could be swallowed by
    an `except BaseException` there."""
    print("geak: interrupted", file=sys.stderr, flush=True)
    os._exit(EXIT_INTERRUPTED)
