"""Benchmark of the editor's comparison with the last commit (`geak.base`; not a test): a real client over stdio
against `python -m geak.server`, in a temporary git repository where the kernel file is committed.

Each save changes the file's code (a new line above its first kernel) but not what its kernels compute, so every save is
checked anew and then compared with HEAD's version ("same outputs"); the first save of a session warms the evaluator
up and runs the base once (the evaluator keeps the base's runs by content), and is not counted. Two sessions:

- base off (`geak.base` empty): didSave -> the diagnostics published after the check;
- base HEAD: didSave -> the diagnostics published after the check, whose job also compared the test's outputs with
  the base's ("outputs on the test are HEAD's"), then after the probes' job ("same outputs as HEAD").

Targets it measures: warm didSave -> diagnostics with the base comparison <= 1.5 s (after the probes); the comparison
adds <= 25% to a save's check once the base's runs are cached (the check with the test outputs compared against the
check alone, medians; what the probes add after it is reported too). Timing on save is off unless `--timing` (a
timing runs after the diagnostics, and would only lengthen the wait between saves).

    python benchmarks/lsp_base_bench.py [--saves 10] [--kernel FILE] [--device auto|gpu|interpreter] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lsp_bench import percentile
from lsp_client import Client, until

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # git_repos: the repositories the tests make, made the same way here
from git_repos import new_repo  # noqa: E402

TARGET_MS = 1500.0  # warm didSave -> diagnostics with the base comparison
TARGET_OVERHEAD = 0.25  # what the comparison may add to a save's check


def committed_repository(kernel: Path) -> Path:
    """A new git repository with `kernel` committed at HEAD (``tests/git_repos.py``); returns the file's path there."""
    repo = new_repo(Path(tempfile.mkdtemp(prefix="geak-lsp-base-bench-")))
    path = repo.write(kernel.name, kernel.read_text())
    repo.commit("the kernel as committed")
    return path


async def saves_to_diagnostics(client: Client, path: Path, saves: int, compared: bool) -> list[dict[str, float]]:
    """Per counted save: `check_ms` (didSave -> the diagnostics after the check) and, when `compared`,
    `diagnostics_ms` (-> after the comparison; else the same as `check_ms`)."""
    uri, text = path.as_uri(), path.read_text()
    if "@triton.jit" not in text:
        raise ValueError(f"{path.name} has no @triton.jit kernel")
    said = f"{path.name}: same outputs as HEAD:{path.name}"
    said_first = f"{path.name}: outputs on the test are HEAD:{path.name}'s; probing other inputs"
    found = []
    for i in range(saves + 1):  # the first save warms the evaluator up (and runs the base once): not counted
        version = 100 + i
        line = f"_SAVE = {i}  # new code in the kernels' part, the same outputs\n\n\n"
        new = text.replace("@triton.jit", line + "@triton.jit", 1)
        client.change(uri, new, version)
        await until(lambda v=version: [p for _, p in client.published if p.uri == uri and p.version == v], 30, "edit")
        await client.idle()
        seen, logged = len(client.published), len(client.logs)
        compared_before, first_before = client.logs.count(said), client.logs.count(said_first)
        path.write_text(new)  # as an editor saves: the server's file watcher sees its own save's content
        started = time.perf_counter()
        client.save(uri)
        wanted = 3 if compared else 2  # the immediate static publish, after the check, after the comparison

        def published(seen=seen, version=version, wanted=wanted):
            mine = [t for t, p in client.published[seen:] if p.uri == uri and p.version == version]
            return mine if len(mine) >= wanted else None

        times = await until(published, 300, "diagnostics after the check (and the comparison)")
        await client.idle()
        if any("changed on disk" in line for line in client.logs[logged:]):
            raise RuntimeError(f"save {i} was checked again from the disk: the figures would not be a save's")
        both = (client.logs.count(said_first) - first_before, client.logs.count(said) - compared_before)
        if compared and (both != (1, 1) if i else both[1] != 1):  # the first save runs the base: no kept run yet
            raise RuntimeError(f"save {i} was not compared with HEAD as expected; the server said:\n"
                               + "\n".join(client.logs[-10:]))  # fmt: skip
        if i:
            checked, done = times[1] - started, times[wanted - 1] - started
            found.append({"check_ms": checked * 1000, "diagnostics_ms": done * 1000})
    return found


async def session(kernel: Path, args: argparse.Namespace, base: str) -> tuple[str, list[dict[str, float]]]:
    path = committed_repository(kernel)
    client = Client({"device": args.device, "base": base, "timeOnSave": args.timing})
    await client.begin(path.parent)
    try:
        client.open(path)
        status = await client.evaluator_ready(300)
        found = await saves_to_diagnostics(client, path, args.saves, compared=bool(base))
    finally:
        await client.end()
        shutil.rmtree(path.parent, ignore_errors=True)
    return f"{status.backend} / {status.device}", found


def stats(values: list[float]) -> dict[str, float]:
    return {"n": len(values), "median": statistics.median(values), "p90": percentile(values, 90),
            "min": min(values), "max": max(values)}  # fmt: skip


async def main(args: argparse.Namespace) -> dict:
    kernel = Path(args.kernel).resolve()
    device, off = await session(kernel, args, "")
    print(f"base off: {len(off)} saves measured", file=sys.stderr, flush=True)
    _, on = await session(kernel, args, "HEAD")
    off_ms = stats([s["diagnostics_ms"] for s in off])
    check_ms = stats([s["check_ms"] for s in on])
    on_ms = stats([s["diagnostics_ms"] for s in on])
    probes_ms = stats([s["diagnostics_ms"] - s["check_ms"] for s in on])
    overhead = check_ms["median"] / off_ms["median"] - 1
    return {
        "device": device,
        "file": str(kernel.relative_to(ROOT) if kernel.is_relative_to(ROOT) else kernel),
        "saves": args.saves,
        "timing_on_save": args.timing,
        "base_off_ms": off_ms,
        "base_on_check_ms": check_ms,
        "base_on_ms": on_ms,
        "probes_ms": probes_ms,
        "overhead": overhead,
        "overhead_with_probes": on_ms["median"] / off_ms["median"] - 1,
        "targets": {
            "diagnostics_with_base_ms": TARGET_MS,
            "diagnostics_with_base_met": on_ms["median"] <= TARGET_MS,
            "overhead": TARGET_OVERHEAD,
            "overhead_met": overhead <= TARGET_OVERHEAD,
        },
    }


def print_report(report: dict) -> None:
    print(f"device: {report['device']}; file: {report['file']}; {report['saves']} warm saves per session "
          f"(the base's runs cached); timing on save: {report['timing_on_save']}")  # fmt: skip
    print(f"{'didSave ->':44} {'median':>9} {'p90':>9} {'min':>9} {'max':>9}")
    rows = (
        ("diagnostics, geak.base off", "base_off_ms"),
        ("diagnostics, test outputs compared, HEAD", "base_on_check_ms"),
        ("diagnostics after the probes too, HEAD", "base_on_ms"),
        ("  of which the probes", "probes_ms"),
    )
    for label, key in rows:
        s = report[key]
        print(f"{label:44} " + " ".join(f"{s[k]:6.0f} ms" for k in ("median", "p90", "min", "max")))
    t = report["targets"]
    print(f"comparing the test's outputs adds {report['overhead']:+.0%} to a save's check (medians, HEAD vs off); "
          f"with the probes {report['overhead_with_probes']:+.0%}")  # fmt: skip
    print(f"targets: diagnostics with the base <= {t['diagnostics_with_base_ms']:.0f} ms: "
          f"{'met' if t['diagnostics_with_base_met'] else 'NOT met'}; overhead <= {t['overhead']:.0%}: "
          f"{'met' if t['overhead_met'] else 'NOT met'}")  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", default=str(ROOT / "snippets/kernels/vector_add.py"))
    parser.add_argument("--saves", type=int, default=10, help="warm saves measured per session")
    parser.add_argument("--device", choices=("auto", "gpu", "interpreter"), default="auto")
    parser.add_argument("--timing", action="store_true", help="time the kernels after each save (GPU)")
    parser.add_argument("--out", help="write the report as JSON here")
    args = parser.parse_args()
    if args.saves < 1 or not Path(args.kernel).is_file():
        parser.error("--saves must be at least 1 and --kernel an existing file")
    result = asyncio.run(main(args))
    print_report(result)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    sys.exit(0)
