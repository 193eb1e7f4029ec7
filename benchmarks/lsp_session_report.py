"""A whole editor session through the GEAK language server, with a real LSP client, printed as a transcript:
open a corpus kernel, save, read the diagnostics and latency hints, hover the kernel (on a GPU, again until the
profiler's measurement is in it, or 60 s), run Optimize (the
launch-parameter search unless --model is given), apply the edit, save, and read the new hints.

    python benchmarks/lsp_session_report.py [--kernel snippets/kernels/vector_add.py] [--budget 24]
        [--model M --base-url URL] [--device auto|gpu|interpreter]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import time
import uuid
from pathlib import Path

from lsp_client import Client, apply_edits, until

from geak.server.lsp.analysis import analyze
from geak.server.lsp.requests import plain

ROOT = Path(__file__).resolve().parent.parent
START = time.perf_counter()
PROFILE_WAIT_S = 60.0  # how long the hover is asked again for the profiler's measurement


def say(message: str) -> None:
    print(f"[{time.perf_counter() - START:7.2f} s] {message}", flush=True)


def show_diagnostics(client: Client, uri: str, version: int) -> None:
    mine = [p for _, p in client.published if p.uri == uri and p.version == version]
    diagnostics = mine[-1].diagnostics if mine else []
    if not diagnostics:
        say("  diagnostics: none")
    for d in diagnostics:
        say(f"  diagnostic line {d.range.start.line + 1} [{d.severity.name.lower()}] {d.message.splitlines()[0][:150]}")


async def show_hints(client: Client, uri: str) -> list:
    hints = await client.hints(uri)
    if not hints:
        say("  inlay hints: none")
    for h in hints:
        say(f"  inlay hint line {h.position.line + 1}: {h.label.strip()}")
    return hints


async def checked(client: Client, uri: str, version: int, seen: int, since: float, what: str) -> None:
    """Wait for the check's publish (the second for this version: the first is the immediate static one)."""
    await until(
        lambda: len([p for _, p in client.published[seen:] if p.uri == uri and p.version == version]) > 1,
        900,
        "the check's diagnostics",
    )
    say(f"{what}: the check's diagnostics after {time.perf_counter() - since:.2f} s")
    show_diagnostics(client, uri, version)
    await client.idle(900)


async def save(client: Client, uri: str, version: int, what: str) -> None:
    seen, since = len(client.published), time.perf_counter()
    client.save(uri)
    await checked(client, uri, version, seen, since, what)


async def main(args: argparse.Namespace) -> None:
    root = Path(tempfile.mkdtemp(prefix="geak-lsp-session-"))
    path = root / Path(args.kernel).name
    shutil.copy(args.kernel, path)
    (root / "geak.yaml").write_text(f"search_time_s: {args.budget}\nmax_iteration: {args.iterations}\n")
    settings = {"device": args.device, "model": args.model, "baseUrl": args.base_url}
    client = Client(settings)
    say(f"starting `python -m geak.server` in {root}")
    await client.begin(root)
    try:
        status = await client.evaluator_ready(300)
        say(f"geak/status: backend {status.backend}, device {status.device}")
        seen, since = len(client.published), time.perf_counter()
        uri = client.open(path, version=1)
        await checked(client, uri, 1, seen, since, f"opened {path.name}")
        await save(client, uri, 1, "saved (unchanged: the cached result)")
        hints = await show_hints(client, uri)
        model = analyze(path.read_text(), str(path))
        for kernel in model.kernels:
            hover = await client.hover(uri, kernel.line - 1, len("def ") + 1)
            waited = time.perf_counter()
            while status.backend != "interpreter" and time.perf_counter() - waited < PROFILE_WAIT_S:
                if hover is None or "measured:" in hover.contents.value or "Not profiled" in hover.contents.value:
                    break
                await asyncio.sleep(0.5)  # the profile follows the timing (where Nsight Compute is installed)
                hover = await client.hover(uri, kernel.line - 1, len("def ") + 1)
            say(f"hover on {kernel.name}:")
            for line in (hover.contents.value if hover else "(none)").splitlines():
                print(f"            | {line}")

        token = f"session-{uuid.uuid4()}"
        strategy = f"model {args.model}" if args.model else "launch-parameter search"
        say(f"Optimize all kernels in {path.name} ({strategy})")
        started = time.perf_counter()
        result = plain(
            await client.protocol.send_request_async(
                "geak/optimize", {"textDocument": {"uri": uri}, "kernel": None, "version": 1, "workDoneToken": token}
            )
        )
        say(f"optimize finished in {time.perf_counter() - started:.1f} s ({len(client.progress)} progress messages)")
        say(f"summary: {result['summary']}")
        for c in result["candidates"]:
            speed = f"{c['speedup']:.3f}x [{c['speedupLow']:.3f}, {c['speedupHigh']:.3f}]" if c["speedup"] else "-"
            latency = f"{c['latencyMs']:.4f} ms" if c["latencyMs"] else "-"
            verdict = "pass" if c["passed"] else f"fail ({c['stage']})"
            say(f"  {c['id']:6} {c['origin']:8} {verdict:12} {latency:12} {speed:24} {c['note'][:50]}")
        await show_hints(client, uri)
        if result["edit"]:
            change = result["edit"]["documentChanges"][0]
            annotation = next(iter(result["edit"]["changeAnnotations"].values()))
            say(
                f"edit: {len(change['edits'])} text edit(s) on version {change['textDocument']['version']}, "
                f"label {annotation['label']!r}, needsConfirmation={annotation['needsConfirmation']}"
            )
            new_text = apply_edits(path.read_text(), change["edits"])
            client.change(uri, new_text, 2)
            path.write_text(new_text)
            await save(client, uri, 2, "applied the edit and saved")
            await show_hints(client, uri)
        else:
            say("no edit proposed")
        if hints:
            say(f"latency hints before: {[h.label.strip() for h in hints]}")
    finally:
        await client.end()
        shutil.rmtree(root, ignore_errors=True)
    say("session closed")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", default=str(ROOT / "snippets/kernels/vector_add.py"))
    parser.add_argument("--budget", type=float, default=60, help="launch search seconds")
    parser.add_argument("--iterations", type=int, default=3, help="model rounds (with --model)")
    parser.add_argument("--model")
    parser.add_argument("--base-url")
    parser.add_argument("--device", choices=("auto", "gpu", "interpreter"), default="auto")
    asyncio.run(main(parser.parse_args()))
