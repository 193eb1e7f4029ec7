"""Sample the host every 2 s while something runs (not a test): one JSON line each to the file named, with the CPU
split over all cores since the line before (user, system, idle, iowait, in %), pressure stall information where the
kernel has it (`/proc/pressure`), dirty, writeback and available memory (MB) and what was written to disk (MB).

    python benchmarks/host_sampler.py host.jsonl &   (stop it with kill)

What it shows for `geak eval`: its checks are the host's work.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

EVERY_S = 2.0
MEMORY_FIELDS = ("Dirty", "Writeback", "MemAvailable", "Shmem")


def cpu_ticks() -> list[int]:
    return [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]


def pressure() -> dict[str, float]:
    found: dict[str, float] = {}
    for kind in ("cpu", "io", "memory"):
        try:
            lines = Path(f"/proc/pressure/{kind}").read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            found[f"{kind}_{parts[0]}_avg10"] = float(parts[1].split("=")[1])
    return found


def memory_mb() -> dict[str, int]:
    found = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, value = line.split(":", 1)
        if key in MEMORY_FIELDS:
            found[key] = int(value.split()[0]) // 1024
    return found


def written_mb() -> int:
    sectors = 0
    for line in Path("/proc/diskstats").read_text().splitlines():
        parts = line.split()
        if len(parts) > 9 and not parts[2].startswith(("loop", "ram")):
            sectors += int(parts[9])
    return sectors * 512 >> 20


def main() -> None:
    started, before, written_before = time.time(), cpu_ticks(), written_mb()
    with open(sys.argv[1], "w") as out:
        while True:
            time.sleep(EVERY_S)
            now, written = cpu_ticks(), written_mb()
            d = [a - b for a, b in zip(now, before, strict=True)]
            total = sum(d) or 1
            row = {
                "t": round(time.time() - started, 1),
                "user": round(100 * (d[0] + d[1]) / total),
                "sys": round(100 * (d[2] + d[5] + d[6]) / total),
                "idle": round(100 * d[3] / total),
                "iowait": round(100 * d[4] / total),
                "written_mb": written - written_before,
                **memory_mb(),
                **pressure(),
            }
            before, written_before = now, written
            out.write(json.dumps(row) + "\n")
            out.flush()


if __name__ == "__main__":
    main()
