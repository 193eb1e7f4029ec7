"""Benchmark of the GEAK language server (not a test): a real client over stdio against `python -m geak.server`.

1. didSave -> diagnostics on a warm evaluator, for `snippets/kernels/vector_add.py` (each save has new content, so
   no cached result is reused): the time from didSave to the diagnostics published after the check.
2. p50/p99 latency of hover, inlay hints and code-action lists, idle and while an optimize (launch-parameter
   search, no model) runs on the same file.

    python benchmarks/lsp_bench.py [--saves 10] [--requests 300] [--kernel FILE] [--device auto|gpu|interpreter]
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

from lsp_client import Client, until
from lsprotocol import types

ROOT = Path(__file__).resolve().parent.parent


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


async def save_to_diagnostics(client: Client, uri: str, text: str, saves: int) -> list[float]:
    times = []
    for i in range(saves + 1):  # the first save warms the evaluator up and is not counted
        version = 100 + i
        client.change(uri, text + f"# save {i}\n", version)
        await until(lambda v=version: [p for _, p in client.published if p.uri == uri and p.version == v], 30, "edit")
        await client.idle()
        seen = len(client.published)
        started = time.perf_counter()
        client.save(uri)

        def checked(seen=seen, version=version):
            mine = [(t, p) for t, p in client.published[seen:] if p.uri == uri and p.version == version]
            return mine[1] if len(mine) > 1 else None  # the first is the immediate static publish

        done_at, _ = await until(checked, 300, "diagnostics after the check")
        if i:
            times.append(done_at - started)
        await client.idle()
    return times


async def request_latencies(client: Client, uri: str, n: int, stop: asyncio.Event | None = None) -> dict:
    code_action = types.CodeActionParams(
        types.TextDocumentIdentifier(uri),
        types.Range(types.Position(20, 4), types.Position(20, 4)),
        types.CodeActionContext(diagnostics=[]),
    )
    kinds = {
        "hover": lambda: client.hover(uri, 15, 6),
        "inlay hints": lambda: client.hints(uri),
        "code actions": lambda: client.text_document_code_action_async(code_action),
    }
    found: dict[str, list[float]] = {k: [] for k in kinds}
    for i in range(n):
        if stop is not None and stop.is_set():
            break
        for name, request in kinds.items():
            started = time.perf_counter()
            await request()
            found[name].append((time.perf_counter() - started) * 1000)
        await asyncio.sleep(0.01 if i % 10 else 0.05)
    return found


def summarize(found: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    return {
        k: {"n": len(v), "p50_ms": percentile(v, 50), "p99_ms": percentile(v, 99), "max_ms": max(v)}
        for k, v in found.items()
        if v
    }


async def main(args: argparse.Namespace) -> dict:
    root = Path(tempfile.mkdtemp(prefix="geak-lsp-bench-"))
    kernel = root / Path(args.kernel).name
    shutil.copy(args.kernel, kernel)
    (root / "geak.yaml").write_text(f"search_time_s: {args.budget}\n")
    client = Client({"device": args.device})
    await client.begin(root)
    try:
        uri = client.open(kernel)
        status = await client.evaluator_ready(300)
        text = kernel.read_text()
        saves = await save_to_diagnostics(client, uri, text, args.saves)
        print(f"didSave -> diagnostics (warm, n={len(saves)}): median {statistics.median(saves) * 1000:.0f} ms, "
              f"min {min(saves) * 1000:.0f}, max {max(saves) * 1000:.0f}", file=sys.stderr, flush=True)  # fmt: skip
        idle = await request_latencies(client, uri, args.requests // 3)

        optimizing = asyncio.ensure_future(
            client.protocol.send_request_async("geak/optimize", {"textDocument": {"uri": uri}, "kernel": None})
        )
        await until(lambda: client.statuses[-1].busy, 60, "the optimize to start")
        stop = asyncio.Event()
        optimizing.add_done_callback(lambda _: stop.set())
        busy = await request_latencies(client, uri, args.requests, stop)
        result = await optimizing
        report = {
            "device": f"{status.backend} / {status.device}",
            "file": str(Path(args.kernel).relative_to(ROOT) if Path(args.kernel).is_relative_to(ROOT) else args.kernel),
            "save_to_diagnostics_ms": {
                "n": len(saves),
                "median": statistics.median(saves) * 1000,
                "min": min(saves) * 1000,
                "max": max(saves) * 1000,
            },
            "idle": summarize(idle),
            "during_optimize": summarize(busy),
            "optimize_summary": result.summary,
            "optimize_candidates": len(result.candidates),
        }
    finally:
        await client.end()
        shutil.rmtree(root, ignore_errors=True)
    return report


def print_report(report: dict) -> None:
    s = report["save_to_diagnostics_ms"]
    print(f"device: {report['device']}; file: {report['file']}")
    spread = f"min {s['min']:.0f}, max {s['max']:.0f}"
    print(f"didSave -> diagnostics (warm, n={s['n']}): median {s['median']:.0f} ms, {spread}")
    for phase in ("idle", "during_optimize"):
        for kind, v in report[phase].items():
            figures = f"p50 {v['p50_ms']:6.1f} ms  p99 {v['p99_ms']:6.1f} ms  max {v['max_ms']:6.1f} ms"
            print(f"{phase:16} {kind:13} n={v['n']:4}  {figures}")
    print(f"optimize: {report['optimize_summary']} ({report['optimize_candidates']} candidates)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", default=str(ROOT / "snippets/kernels/vector_add.py"))
    parser.add_argument("--saves", type=int, default=10)
    parser.add_argument("--requests", type=int, default=300, help="request rounds while the optimize runs")
    parser.add_argument("--budget", type=float, default=60, help="launch search seconds of the optimize")
    parser.add_argument("--device", choices=("auto", "gpu", "interpreter"), default="auto")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = asyncio.run(main(args))
    print(json.dumps(result, indent=1)) if args.json else print_report(result)
    sys.exit(0)
