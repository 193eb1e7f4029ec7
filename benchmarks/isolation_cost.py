"""What job isolation costs: warm checks per minute with each isolation mechanism, on one file.

    .venv/bin/python benchmarks/isolation_cost.py [FILE] [--checks N] [--backend auto|gpu|interpreter] [--against REF]

Modes, each with a pool of its own (started before the clock runs): "process only" (no namespaces), "namespaces"
(per-job namespaces, no bubblewrap) and "bwrap + namespaces" (where bubblewrap is installed). The modes take turns
check by check, so drifts of the machine's load hit all of them alike. Prints one line per mode and the overhead
against "process".
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import time
from pathlib import Path

from geak.evaluator.api import EvalOptions, Evaluator
from geak.evaluator.pool import WorkerPool
from geak.evaluator.shared.isolation_policy import PROCESS_ONLY

ROOT = Path(__file__).resolve().parent.parent


async def measure(file: Path, against: Path | None, checks: int, backend: str) -> None:
    modes = {PROCESS_ONLY: ("process", False), "namespaces": ("namespaces", False)}
    if shutil.which("bwrap"):
        modes["bwrap + namespaces"] = ("namespaces", True)
    evaluators = {}
    for label, (isolation, bwrap) in modes.items():
        options = EvalOptions(backend=backend, isolation=isolation)
        evaluators[label] = Evaluator(options, WorkerPool(backend=backend, isolation=isolation, bwrap=bwrap))
    seconds: dict[str, list[float]] = {label: [] for label in modes}
    try:
        for label, ev in evaluators.items():  # start-up, the reference run and the first compile: not timed
            first = await ev.check(file, against=against)
            if not first.ok:
                sys.exit(f"{label}: the check fails: {first.message}")
            if first.isolation != label:
                sys.exit(f"{label}: the verdict says isolation {first.isolation!r}")
        for _ in range(checks):
            for label, ev in evaluators.items():
                t0 = time.perf_counter()
                result = await ev.check(file, against=against)
                seconds[label].append(time.perf_counter() - t0)
                assert result.ok, result.message
    finally:
        for ev in evaluators.values():
            await ev.aclose()
    base = statistics.median(seconds[PROCESS_ONLY])
    info = evaluators[PROCESS_ONLY].pool.info
    print(f"{file.name}, {checks} warm checks per mode, {info.get('device')} ({info.get('backend')})")
    for label, samples in seconds.items():
        median = statistics.median(samples)
        print(
            f"{label:>20}: {60 / median:7.1f} checks/min (median {median * 1000:.0f} ms per check), "
            f"overhead {100 * (median / base - 1):+.1f}%"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", type=Path, default=ROOT / "tests" / "fixtures" / "add_native.py")
    parser.add_argument("--against", type=Path, default=None)
    parser.add_argument("--checks", type=int, default=10)
    parser.add_argument("--backend", default="auto", choices=("auto", "gpu", "interpreter"))
    args = parser.parse_args()
    asyncio.run(measure(args.file, args.against, args.checks, args.backend))


if __name__ == "__main__":
    main()
