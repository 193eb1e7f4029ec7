"""`geak bench --base` on real corpus kernels in git repositories made here (a GPU report, not a test).

    python benchmarks/base_report.py --out DIR [--kernels vector_add,softmax_rowwise,...] [--repeats 3]

1. **Slowdown**: `vector_add.py` committed, then a commit that drops its launch block 1024→32
   (`block_size: int = 1024` → `32`); `geak bench FILE --base HEAD~1` must call it significantly slower, and so
   must the editor: the language server (`--editor`, a real client over stdio, timing on save) with the drop saved
   but not committed shows the kernel's inlay hint `… · N× slower than HEAD [low, high]` and a warning at it.
2. **Edits that change nothing it runs**, per kernel, each `--repeats` times on a fresh repository:
   - *comment*: a comment and a blank line added; GEAK says "same as HEAD" and times nothing (by design);
   - *inert*: a module-level constant added before the test section, so the code differs but no kernel or call
     does: `geak bench FILE --base HEAD` times both, and a verdict other than "within noise" is a false report.

Prints a table and writes DIR/base_report.json (device, date, commit, every command's verdict and speedup).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lsp_client import Client, until  # benchmarks/lsp_client.py: before tests/ (which has its own) is on the path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # git_repos: the repositories the tests make, made the same way here
from git_repos import Repo, new_repo  # noqa: E402

KERNELS = ROOT / "snippets" / "kernels"
DEFAULT_KERNELS = "vector_add,softmax_rowwise,layer_norm_fwd,rms_norm_fwd,cross_entropy,matmul_fp16"
SEPARATOR = "#" * 146
SLOWER = ("block_size: int = 1024", "block_size: int = 32")


def committed(folder: Path, name: str, text: str) -> Path:
    """`text` committed as `name` in a new repository at `folder` (``tests/git_repos.py``); the file's path."""
    repo = new_repo(folder)
    path = repo.write(name, text)
    repo.commit("base")
    return path


def bench_base(file: Path, rev: str, timeout_s: float) -> dict[str, Any]:
    """`geak bench FILE --base REV --json` in FILE's repository: its verdict, speedup and interval."""
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "geak.server.cli", "bench", file.name, "--base", rev, "--json"],
        cwd=file.parent,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    row: dict[str, Any] = {"exit": proc.returncode, "seconds": round(time.perf_counter() - started, 1)}
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError:
        row["error"] = (proc.stderr or proc.stdout).strip()[-400:]
        return row
    verdict = (data.get("files") or [{}])[0]
    row["verdict"] = verdict.get("verdict")
    row["message"] = verdict.get("message")
    speedup = ((verdict.get("bench") or {}).get("speedup")) or {}
    for key in ("ratio", "low", "high", "verdict", "significant"):
        row[f"speedup_{key}"] = speedup.get(key)
    return row


def _before_tests(text: str, added: str) -> str:
    """`text` with `added` just before its test section: the TritonBench separator, else the first top-level test."""
    head, sep, tail = text.partition(SEPARATOR)
    if sep:
        return head + added + sep + tail
    head, sep, tail = text.partition("\ndef test_")
    if not sep:
        raise SystemExit("no test section found in the kernel file")
    return head + "\n" + added + sep.lstrip("\n") + tail


def inert_edit(text: str) -> str:
    return _before_tests(text, "_BASE_REPORT_INERT = 1\n\n\n")


def comment_edit(text: str) -> str:
    return _before_tests(text, "# a comment added by base_report.py\n\n\n")


def slowdown(work: Path, timeout_s: float) -> dict[str, Any]:
    text = (KERNELS / "vector_add.py").read_text()
    if SLOWER[0] not in text:
        raise SystemExit(f"vector_add.py no longer has {SLOWER[0]!r}")
    file = committed(work / "slowdown", "vector_add.py", text)
    file.write_text(text.replace(SLOWER[0], SLOWER[1]))
    Repo(file.parent).commit("block 1024 -> 32")
    return {"case": "vector_add BLOCK 1024→32", "rev": "HEAD~1", **bench_base(file, "HEAD~1", timeout_s)}


def editor_slowdown(work: Path, timeout_s: float) -> dict[str, Any]:
    """The block drop saved over HEAD's `vector_add.py` in the editor (timing on save): the kernel's inlay hint and
    the slowdown's warning once the paired timing against HEAD has run."""
    text = (KERNELS / "vector_add.py").read_text()
    file = committed(work / "editor", "vector_add.py", text)
    file.write_text(text.replace(SLOWER[0], SLOWER[1]))

    async def run() -> dict[str, Any]:
        client = Client({"device": "gpu", "base": "HEAD", "timeOnSave": True})
        started = time.perf_counter()
        await client.begin(file.parent)
        try:
            uri = client.open(file)
            labels: list[str] = []

            async def hint_against_head() -> list[str]:
                labels[:] = [str(h.label) for h in await client.hints(uri)]
                return [label for label in labels if " than HEAD " in label or "of HEAD" in label]

            try:
                while not await hint_against_head():
                    if time.perf_counter() - started > timeout_s:
                        raise TimeoutError
                    await asyncio.sleep(0.5)
            except TimeoutError:
                return {"case": "editor: vector_add BLOCK 1024→32 saved", "error": f"no hint against HEAD after "
                        f"{timeout_s:g} s; hints {labels}; last log lines {client.logs[-5:]}"}  # fmt: skip
            published = [p for _, p in client.published if p.uri == uri]
            warnings = [d.message for d in (published[-1].diagnostics if published else []) if d.code == "base-slower"]
            await until(lambda: client.statuses and not client.statuses[-1].busy, 60, "an idle server")
            return {"case": "editor: vector_add BLOCK 1024→32 saved", "hint": next(iter(await hint_against_head())),
                    "warnings": warnings, "seconds": round(time.perf_counter() - started, 1)}  # fmt: skip
        finally:
            await client.end()

    row = asyncio.run(run())
    hint = row.get("hint", "")
    row["slower_reported"] = " slower than HEAD " in hint and bool(row.get("warnings"))
    return row


def noop_edits(work: Path, kernels: list[str], repeats: int, timeout_s: float) -> list[dict[str, Any]]:
    rows = []
    for name in kernels:
        text = (KERNELS / f"{name}.py").read_text()
        for edit, change in (("comment", comment_edit), ("inert", inert_edit)):
            for i in range(repeats if edit == "inert" else 1):
                file = committed(work / f"{name}-{edit}-{i}", f"{name}.py", text)
                file.write_text(change(text))
                row = {"case": f"{name} {edit} #{i + 1}", "rev": "HEAD", **bench_base(file, "HEAD", timeout_s)}
                rows.append(row)
                print(_line(row), flush=True)
    return rows


def _line(row: dict[str, Any]) -> str:
    ratio = row.get("speedup_ratio")
    interval = f"{ratio:.3f} [{row['speedup_low']:.3f}, {row['speedup_high']:.3f}]" if ratio else "-"
    return (
        f"{row['case']:<34} exit {row['exit']}  {row.get('verdict') or 'error'}  {interval}  "
        f"{row.get('speedup_verdict') or ''}  {row['seconds']} s  {row.get('error', '')[:200]}"
    )


def device() -> str:
    try:
        import torch

        return torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "unknown"


def commit() -> str:
    found = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return found.stdout.strip() or os.environ.get("GEAK_COMMIT", "unknown")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--kernels", default=DEFAULT_KERNELS, help="corpus kernels (snippets/kernels) for the no-op edits"
    )
    parser.add_argument("--repeats", type=int, default=3, help="fresh repositories per kernel for the inert edit")
    parser.add_argument("--timeout", type=float, default=240, help="seconds for one `geak bench`")
    parser.add_argument("--editor", action="store_true", help="also the slowdown in the editor (a GPU: its timing)")
    args = parser.parse_args()
    if shutil.which("git") is None:
        raise SystemExit("git is needed")
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="geak-base-report-") as folder:
        work = Path(folder)
        slow = slowdown(work, args.timeout)
        print(_line(slow), flush=True)
        editor = editor_slowdown(work, args.timeout) if args.editor else None
        if editor is not None:
            print(json.dumps(editor), flush=True)
        rows = noop_edits(work, [k for k in args.kernels.split(",") if k], args.repeats, args.timeout)
    inert = [r for r in rows if " inert " in r["case"]]
    false = [r for r in inert if r.get("speedup_verdict") in ("faster", "slower")]
    summary = {
        "slowdown_reported": slow.get("speedup_significant") is True and (slow.get("speedup_ratio") or 1) < 1,
        "slowdown_in_the_editor": editor.get("slower_reported") if editor is not None else None,
        "inert_timed": sum(1 for r in inert if r.get("speedup_ratio")),
        "inert_false_reports": len(false),
        "comment_same": sum(1 for r in rows if " comment " in r["case"] and r.get("verdict") == "same"),
    }
    record = {
        "device": device(),
        "date": datetime.date.today().isoformat(),
        "commit": commit(),
        "slowdown": slow,
        "editor": editor,
        "edits": rows,
        "summary": summary,
    }
    (args.out / "base_report.json").write_text(json.dumps(record, indent=1))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
