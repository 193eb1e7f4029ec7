"""Benchmark of the language server on a repository's module (not a test): a real client over stdio against
`python -m geak.server`, a copy of the repository as the workspace, the module open in it and saved N times (each
save a new content, a comment line added, so no cached result is reused): the time from didSave to the diagnostics
published after the check by the repository's tests, and what ran (the verdict, the cases run and left out within
the limits, `geak.moduleBudgetS` and `geak.moduleCasesPerTest`).

    python benchmarks/lsp_module_bench.py [--repo ../shared/repos/liger-kernel]
        [--module src/liger_kernel/ops/rms_norm.py] [--saves 5] [--budget-s 20] [--cases-per-test 4]
        [--device auto|gpu|interpreter] [--out FILE.json]

On a CPU, the fixture repository: `--repo tests/fixtures/repos/tinyops --module src/tinyops/ops/scale.py
--device interpreter`. Liger-Kernel's tests need `transformers` in the environment.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lsp_client import Client, until

ROOT = Path(__file__).resolve().parent.parent
LIGER = ROOT.parent / "shared" / "repos" / "liger-kernel"
IGNORED = shutil.ignore_patterns(".git", "__pycache__", "*.egg-info", ".pytest_cache")


def first_kernel_line(text: str) -> int:
    """The 0-based line of the first `@triton.jit` function's name (where a hover asks about it)."""
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list):
            return node.lineno - 1
    raise SystemExit("the module has no @triton.jit kernel")


def found_count(hover: str) -> int:
    """How many tests the hover says were found (it lists a few by name and counts the rest)."""
    lines = hover.splitlines()
    more = next((int(line.split()[2]) for line in lines if line.startswith("- and ") and line.endswith(" more")), 0)
    return sum(1 for line in lines if line.startswith("- tests: ")) + more


def said(hover: str) -> dict[str, str]:
    """What the hover says of the last check: its verdict line and what ran (cases run, left out)."""
    lines = hover.splitlines()
    verdict = next((line for line in lines if line.startswith(("✅", "❌", "ℹ️", "Not checked"))), "")
    ran = next((line[len("Last check: ") :] for line in lines if line.startswith("Last check: ")), "")
    tests = sum(1 for line in lines if line.startswith("- tests: "))
    return {"verdict": verdict, "ran": ran, "tests_listed": str(tests)}


async def save_to_diagnostics(client: Client, uri: str, path: Path, saves: int, line: int) -> list[dict]:
    text = path.read_text()
    runs = []
    for i in range(saves + 1):  # the first save warms the repository's evaluator up and is not counted
        version = 100 + i
        new = text + f"# save {i}\n"
        client.change(uri, new, version)
        await until(lambda v=version: [p for _, p in client.published if p.uri == uri and p.version == v], 60, "edit")
        await client.idle()
        path.write_text(new)  # as the editor saves it
        seen = len(client.published)
        started = time.perf_counter()
        client.save(uri)

        def checked(seen=seen, version=version):
            mine = [(t, p) for t, p in client.published[seen:] if p.uri == uri and p.version == version]
            return mine[1] if len(mine) > 1 else None  # the first is the immediate publish of the save

        done_at, params = await until(checked, 1800, "diagnostics after the check")
        hover = await client.hover(uri, line, 6)
        run = {
            "ms": (done_at - started) * 1000,
            "diagnostics": [f"{d.code}: {d.message.splitlines()[0][:160]}" for d in params.diagnostics],
            **said(hover.contents.value if hover is not None else ""),
        }
        print(f"save {i}{' (warm-up)' if not i else ''}: {run['ms']:.0f} ms · {run['verdict'][:100]} · {run['ran']}",
              file=sys.stderr, flush=True)  # fmt: skip
        if i:
            runs.append(run)
        await client.idle()
    return runs


async def main(args: argparse.Namespace) -> dict:
    source = Path(args.repo).resolve()
    work = Path(tempfile.mkdtemp(prefix="geak-lsp-module-bench-"))
    repo = Path(shutil.copytree(source, work / source.name, ignore=IGNORED))
    module = repo / args.module
    if not module.is_file():
        raise SystemExit(f"{args.module}: no such module in {source}")
    settings = {"device": args.device, "moduleBudgetS": args.budget_s, "moduleCasesPerTest": args.cases_per_test,
                "base": ""}  # fmt: skip
    client = Client(settings)
    await client.begin(repo)
    try:
        uri = client.open(module)
        status = await client.evaluator_ready(600)
        await client.idle(1800)  # the check on open
        line = first_kernel_line(module.read_text())
        opened = await client.hover(uri, line, 6)
        found = opened.contents.value if opened is not None else ""
        runs = await save_to_diagnostics(client, uri, module, args.saves, line)
        ms = [r["ms"] for r in runs]
        return {
            "device": f"{status.backend} / {status.device}",
            "repository": str(source),
            "module": args.module,
            "budget_s": args.budget_s,
            "cases_per_test": args.cases_per_test,
            "tests_listed": [line[len("- tests: ") :] for line in found.splitlines() if line.startswith("- tests: ")],
            "tests_found": found_count(found),
            "save_to_diagnostics_ms": {"n": len(ms), "median": statistics.median(ms), "min": min(ms), "max": max(ms)},
            "saves": runs,
        }
    finally:
        await client.end()
        shutil.rmtree(work, ignore_errors=True)


def print_report(report: dict) -> None:
    s = report["save_to_diagnostics_ms"]
    print(f"device: {report['device']}; module: {report['module']} of {report['repository']}")
    budget = f"{report['budget_s']:g} s" if report["budget_s"] is not None else "none"
    cases = report["cases_per_test"] or "every"
    print(f"tests found: {report['tests_found']}; per save: a budget of {budget}, {cases} case(s) of each test")
    print(f"didSave -> diagnostics (warm, n={s['n']}): median {s['median']:.0f} ms, min {s['min']:.0f}, "
          f"max {s['max']:.0f}")  # fmt: skip
    print(f"{'save':>4}  {'ms':>8}  verdict / what ran")
    for i, run in enumerate(report["saves"], 1):
        print(f"{i:>4}  {run['ms']:>8.0f}  {run['verdict'][:90]}")
        print(f"{'':>4}  {'':>8}  {run['ran'][:110]}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default=str(LIGER), help="the repository (copied: the saves write the copy)")
    parser.add_argument("--module", default="src/liger_kernel/ops/rms_norm.py", help="the module, in the repository")
    parser.add_argument("--saves", type=int, default=5)
    parser.add_argument("--budget-s", type=float, default=20.0, help="geak.moduleBudgetS (0: no limit)")
    parser.add_argument("--cases-per-test", type=int, default=4, help="geak.moduleCasesPerTest (0: every case)")
    parser.add_argument("--device", choices=("auto", "gpu", "interpreter"), default="auto")
    parser.add_argument("--out", help="write the report as JSON here")
    args = parser.parse_args()
    if args.saves < 1:
        parser.error("--saves must be at least 1")
    args.budget_s = args.budget_s or None
    args.cases_per_test = args.cases_per_test or None
    result = asyncio.run(main(args))
    print_report(result)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    sys.exit(0)
