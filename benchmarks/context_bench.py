"""How long GPU contexts take to make when several processes make theirs at once (not a test): forked children of a
torch-imported parent (as jobs are forked from the pool's zygote) each make their context with their first
`torch.empty` on the device; per child, the wall time and the CPU time it took.

    python benchmarks/context_bench.py [N ...]        (default: 1 4 14; CUDA_DEVICE_MAX_CONNECTIONS=1 to compare)

What it shows: the driver makes contexts one at a time.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import sys
import time

import torch


def made_at_once(n: int) -> list[tuple[float, float, float]]:
    """(wall, user, system) seconds of each of `n` children making its context at once."""
    read, write = os.pipe()
    children = []
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            os.close(read)
            started = time.perf_counter()
            torch.empty(1, device="cuda")
            torch.cuda.synchronize()
            wall = time.perf_counter() - started
            used = resource.getrusage(resource.RUSAGE_SELF)
            os.write(write, (json.dumps([wall, used.ru_utime, used.ru_stime]) + "\n").encode())
            os._exit(0)
        children.append(pid)
    os.close(write)
    for pid in children:
        os.waitpid(pid, 0)
    with os.fdopen(read) as lines:
        return [tuple(json.loads(line)) for line in lines.read().splitlines()]


def main() -> None:
    if not torch.cuda.is_available():
        sys.exit("no GPU visible")
    queues = os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS", "default")
    for n in [int(a) for a in sys.argv[1:]] or [1, 4, 14]:
        rows = made_at_once(n)
        walls = [r[0] for r in rows]
        print(f"{n:2d} at once (work queues: {queues}): wall median {statistics.median(walls):.3f} s, max "
              f"{max(walls):.3f} s; per child user {statistics.mean(r[1] for r in rows):.3f} s, system "
              f"{statistics.mean(r[2] for r in rows):.3f} s", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
