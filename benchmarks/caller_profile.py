"""Run a `geak` command in this process with a sampling profiler of its threads (not a test): where the caller's
time goes while `geak eval` runs (its event loop, the worker threads judging outputs).

    python benchmarks/caller_profile.py eval PREDICTIONS.jsonl --suite tritonbench --data DIR --output DIR

Every 10 ms the current frame of each thread is sampled (idle waits left out); every 20 s and at the end, the
counts are written to $PROF_OUT (default /tmp/caller_profile.json): busy samples per thread kind (`main`: the event
loop, `to_thread`: asyncio's worker threads), the top frames, the frames anywhere on a stack, and the process's CPU
time.
"""

from __future__ import annotations

import collections
import json
import os
import resource
import sys
import threading
import time

IDLE = (":select", ":poll", ":epoll", ":_do_waitpid", ":wait", ":_worker", ":sleep")  # frames of a thread waiting
INTERVAL_S = 0.01
DUMP_EVERY_S = 20.0


class Sampler:
    """Counts what every thread but its own is doing, `INTERVAL_S` apart."""

    def __init__(self, out: str):
        self.out = out
        self.started = time.time()
        self.ticks = 0
        self.kinds: collections.Counter[str] = collections.Counter()
        self.top: collections.Counter[str] = collections.Counter()
        self.anywhere: collections.Counter[str] = collections.Counter()

    def run(self) -> None:
        me, main = threading.get_ident(), threading.main_thread().ident
        last_dump = time.time()
        while True:
            time.sleep(INTERVAL_S)
            self.ticks += 1
            names = {t.ident: t.name for t in threading.enumerate()}
            for tid, frame in sys._current_frames().items():
                if tid == me:
                    continue
                stack = []
                while frame is not None and len(stack) < 60:
                    stack.append(f"{frame.f_code.co_filename.rsplit('/', 1)[-1]}:{frame.f_code.co_name}")
                    frame = frame.f_back
                if stack[0].endswith(IDLE) or stack[0].startswith("selectors.py"):
                    continue
                name = names.get(tid, "?")
                kind = "main" if tid == main else "to_thread" if "asyncio" in name else name[:20]
                self.kinds[kind] += 1
                self.top[f"{kind} {stack[0]}"] += 1
                self.anywhere.update(set(stack))
            if time.time() - last_dump > DUMP_EVERY_S:
                self.dump()
                last_dump = time.time()

    def dump(self) -> None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        data = {
            "wall_s": time.time() - self.started,
            "cpu_user_s": usage.ru_utime,
            "cpu_sys_s": usage.ru_stime,
            "ticks": self.ticks,
            "kinds": dict(self.kinds),
            "own": self.top.most_common(40),
            "cum": self.anywhere.most_common(80),
        }
        with open(self.out + ".part", "w") as f:
            json.dump(data, f, indent=0)
        os.replace(self.out + ".part", self.out)


def main() -> int:
    sampler = Sampler(os.environ.get("PROF_OUT", "/tmp/caller_profile.json"))
    threading.Thread(target=sampler.run, daemon=True, name="profiler").start()
    from geak.server.cli.entry import main as geak

    try:
        return geak(sys.argv[1:])
    finally:
        sampler.dump()


if __name__ == "__main__":
    sys.exit(main())
