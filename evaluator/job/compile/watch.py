"""Tells the caller which kernel a check's job is compiling, once a compile has lasted a few seconds.

A job that compiles says nothing while it does: Triton's compile (and ``ptxas`` under it) holds the process. So a
check killed at its time limit while compiling read "timed out" with no word of why, and a probe compiling a new
specialization for longer than its silence limit was called hung; and one kernel's `ptxas` alone can take longer
than a check's time limit (an fp32 `tl.dot` of 64×64 tiles at `num_warps=1`).

Within ``reporting(say)``, every compile the job process makes (Triton's ``JITFunction._do_compile``, and the
configs of an autotuned kernel compiled at once in forked processes, ``configs_ahead``) that is still going
after ``SAY_AFTER_S`` is said as ``{"compiling": what, "begun": when}`` and its end as ``{"compiled": what,
"compile_s": seconds}``. The caller names the compile in a time-out's message and holds a probe's silence limit while
one is said to run (``pool``). Like every word of the job's, it can only explain an end, never pass a check: a job that
says it compiles for ever still ends at its time limit. Only the job process says it: a process forked from it (a
compile's child) inherits the patch, not the voice.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

SAY_AFTER_S = 1.0  # a compile shorter than this is not said (most are: a warm cache reads a kernel in milliseconds)
POLL_S = 0.25  # how often the watch's thread looks at the compile now running


class _Watch:
    """The compile now running in the job's main thread, and the one thread (started before any test, so that no
    test leaves it behind) that says it once it has lasted ``SAY_AFTER_S``."""

    def __init__(self, say: Callable[[dict[str, Any]], None]) -> None:
        self.say, self.owner = say, os.getpid()
        self.lock = threading.Lock()
        self.current: dict[str, Any] | None = None  # what, begun (wall clock), started (monotonic), said
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="compile-watch", daemon=True)

    def _watch(self) -> None:
        while not self.stop.wait(POLL_S):
            with self.lock:
                now = self.current
                if now is not None and not now["said"] and time.monotonic() - now["started"] >= SAY_AFTER_S:
                    now["said"] = True
                    self.say({"compiling": now["what"], "begun": now["begun"]})

    def begin(self, what: str) -> dict[str, Any] | None:
        with self.lock:
            if self.current is not None:  # a compile within a compile: the outer one is said
                return None
            self.current = {"what": what, "begun": time.time(), "started": time.monotonic(), "said": False}
            return self.current

    def end(self, compile_: dict[str, Any]) -> None:
        with self.lock:
            self.current = None
            if compile_["said"]:
                seconds = round(time.monotonic() - compile_["started"], 1)
                self.say({"compiled": compile_["what"], "compile_s": seconds})


_watch: _Watch | None = None


@contextlib.contextmanager
def reporting(say: Callable[[dict[str, Any]], None]) -> Iterator[None]:
    """Within it, this process's compiles that last ``SAY_AFTER_S`` or more are told to `say` (see the module)."""
    global _watch
    from triton.runtime.jit import JITFunction

    original = getattr(JITFunction, "_do_compile", None)
    if original is not None:

        def watched(self: Any, *args: Any, __original: Callable[..., Any] = original, **kwargs: Any) -> Any:
            with compiling(described(self, args)):
                return __original(self, *args, **kwargs)

        JITFunction._do_compile = watched
    _watch = _Watch(say)
    _watch.thread.start()
    try:
        yield
    finally:
        _watch.stop.set()
        _watch.thread.join()
        _watch = None
        if original is not None:
            JITFunction._do_compile = original


@contextlib.contextmanager
def compiling(what: str) -> Iterator[None]:
    """Within it, the job compiles `what`: said once it has lasted ``SAY_AFTER_S``, and its end then too."""
    watch = _watch
    compile_ = watch.begin(what) if watch is not None and os.getpid() == watch.owner else None
    try:
        yield
    finally:
        if compile_ is not None:
            watch.end(compile_)


def described(jit: Any, args: tuple[Any, ...]) -> str:
    """A compile in words: the kernel's name and its launch options (`args`: ``_do_compile``'s, which hold them)."""
    fn = getattr(jit, "fn", None)
    name = getattr(fn, "__qualname__", None) or getattr(jit, "__name__", None) or "a kernel"
    options = next((a for a in args if hasattr(a, "num_warps")), None)
    if options is None:
        return str(name)
    knobs = [f"num_warps={options.num_warps}", f"num_stages={getattr(options, 'num_stages', '?')}"]
    if getattr(options, "num_ctas", 1) != 1:
        knobs.append(f"num_ctas={options.num_ctas}")
    return f"{name}[{', '.join(knobs)}]"
