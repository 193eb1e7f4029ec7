"""A kernel library's modules judged by the library's own tests: every module with `@triton.jit` kernels checked
against itself, and `geak optimize` without a model on a few of them.

    python benchmarks/repo_report.py check [MODULE...] [--repo ../shared/repos/liger-kernel] [--glob 'src/*/ops/*.py']
        [--tests found|own] [--timeout S] [--jobs N] [--budget-s S] [--backend auto|gpu|interpreter] [--out FILE.json]
    python benchmarks/repo_report.py optimize MODULE... [--repo ...] [--search-s S] [--timeout S] [--out FILE.json]

`check`: for each module the glob finds with kernels and no test of its own (only the named ones where MODULEs are
given: paths under the repository or file names), the tests that reach it
(``module_tests``: pytest configuration and import graph), then the module checked against itself with them (the
tests with the module as the reference, then again with its outputs compared on the probes), each within --timeout
seconds (`--tests own`: only the module's own test file, `test_<module>.py`, where the search found one); a table
(module, tests found, cases passed of those run, seconds, verdict and why) and the rows as JSON.
`optimize`: the launch search on each named module (a path under the repository, or a module's file name the glob
finds) with the repository's tests as the judge, every case of them for a proposal: speedup with its interval, or
why there is none. The device is named in the JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

from geak.agent.config import AgentConfig
from geak.agent.session import OptimizeSession
from geak.evaluator import (
    EvalOptions,
    Evaluator,
    RepositoryError,
    cases_run,
    check_module_in_jobs,
    looks_like_triton,
    module_tests,
    needs_repository_tests,
)

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_REPO = ROOT.parent / "shared" / "repos" / "liger-kernel"


def named(path: Path, repo: Path, names: list[str]) -> bool:
    return path.name in names or str(path.relative_to(repo)) in names


def kernel_modules(repo: Path, pattern: str) -> list[Path]:
    """The modules under `repo` the glob finds with `@triton.jit` kernels and no test of their own."""
    return [p for p in sorted(repo.glob(pattern)) if looks_like_triton(p) and needs_repository_tests(p)]


async def check_all(args: argparse.Namespace) -> dict:
    repo = args.repo.resolve()
    modules = [m for m in kernel_modules(repo, args.glob) if not args.modules or named(m, repo, args.modules)]
    options = EvalOptions(backend=args.backend, spares=0, max_concurrent=args.jobs, tests_budget_s=args.budget_s,
                          cases_per_test=4 if args.budget_s else None)  # fmt: skip
    rows = []
    async with Evaluator(options, readable=(str(repo),)) as evaluator:
        runtime = await evaluator.runtime()
        for path in modules:
            rows.append(await check_one(evaluator, repo, path, args))
            print(line(rows[-1]), flush=True)
    return {"repo": str(repo), "runtime": runtime, "options": options.to_dict(), "modules": rows}


async def check_one(evaluator: Evaluator, repo: Path, path: Path, args: argparse.Namespace) -> dict:
    row: dict = {"module": str(path.relative_to(repo)), "tests_found": 0, "passed": 0, "ran": 0, "seconds": 0.0}
    started = time.perf_counter()
    try:
        target = module_tests(path)
    except RepositoryError as e:
        return {**row, "verdict": "no tests", "why": str(e)}
    row["tests_found"] = len(target.tests)
    row["test_files"] = sorted({t.node.partition("::")[0] for t in target.tests})
    own = [f for f in row["test_files"] if Path(f).name == f"test_{path.stem}.py"]
    if args.tests == "own" and own:  # the module's own test file alone, named as a user would with --tests
        target = module_tests(path, [str(target.repository.root / f) for f in own])
        row["test_files"], row["tests_from"] = own, "own file"
    try:
        result = await asyncio.wait_for(
            check_module_in_jobs(evaluator, target, args.jobs, against=path), timeout=args.timeout
        )
    except TimeoutError:
        return {**row, "seconds": time.perf_counter() - started, "verdict": "timed out",
                "why": f"not done within {args.timeout:g} s"}  # fmt: skip
    except Exception as e:  # the module failing as its own reference (its verdict says why), a worker not started
        said = getattr(e, "verdict", None)
        why = f"{said.summary}; {said.output_tail.strip().splitlines()[-1:]}" if said is not None else str(e)
        return {**row, "seconds": time.perf_counter() - started, "verdict": "fail" if said else "error",
                "why": why.splitlines()[0]}  # fmt: skip
    verdict = "pass" if result.ok else "not checkable" if result.not_checkable else "fail"
    return {
        **row,
        "seconds": time.perf_counter() - started,
        "passed": sum(t.kind in ("pass", "xpass") for t in result.tests),
        "ran": sum(t.kind not in ("skipped", "xfail", "benchmark", "left out") for t in result.tests),
        "cases": cases_run(result.tests, args.budget_s),
        "verdict": verdict,
        "why": result.not_checkable or result.summary,
        "failed": [{"case": t.name, "message": t.message[:300]} for t in result.tests if not t.ok][:10],
    }


def line(row: dict) -> str:
    return (f"{row['module']:<48} {row['tests_found']:>5} {row['passed']:>4}/{row['ran']:<4} {row['seconds']:>8.1f} "
            f"{row['verdict']:<14} {row['why'][:100]}")  # fmt: skip


async def optimize_all(args: argparse.Namespace) -> dict:
    repo = args.repo.resolve()
    found = {p.name: p for p in kernel_modules(repo, args.glob)}
    rows = []
    for name in args.modules:
        path = (repo / name) if (repo / name).is_file() else found.get(name)
        if path is None:
            rows.append({"module": name, "verdict": "not found", "why": f"no file {name} under {repo} or {args.glob}"})
        else:
            rows.append(await optimize_one(repo, path, args))
        print(json.dumps(rows[-1]), flush=True)
    return {"repo": str(repo), "search_s": args.search_s, "modules": rows}


async def optimize_one(repo: Path, path: Path, args: argparse.Namespace) -> dict:
    row: dict = {"module": str(path.relative_to(repo))}
    started = time.perf_counter()
    try:
        target = module_tests(path)
    except RepositoryError as e:
        return {**row, "verdict": "no tests", "why": str(e)}
    with tempfile.TemporaryDirectory(prefix="geak-repo-report-") as runs:
        cfg = AgentConfig(search_time_s=args.search_s, output_path=Path(runs))
        session = OptimizeSession(path, cfg, backend=args.backend, module=target)
        try:
            result = await asyncio.wait_for(session.run(), timeout=args.timeout)
        except TimeoutError:
            return {**row, "verdict": "timed out", "why": f"not done within {args.timeout:g} s"}
        except Exception as e:
            return {**row, "verdict": "error", "why": str(e).splitlines()[0]}
    best = result.best.evaluation if result.best is not None else None
    speedup = [best.speedup, best.speedup_low, best.speedup_high] if best and best.speedup else None
    return {
        **row,
        "seconds": time.perf_counter() - started,
        "device": result.runtime.get("device"),
        "tests_found": len(target.tests),
        "verdict": "faster" if result.improved else "kept",
        "speedup": speedup,
        "speedup_verdict": best.speedup_verdict if best else None,
        "why": result.message,
        "baseline_ms": result.baseline_ms,
        "search": {k: result.search.get(k) for k in ("knobs", "screened", "correct", "finalists", "seconds")}
        if result.search
        else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=("check", "optimize"))
    parser.add_argument("modules", nargs="*", help="the modules (paths under --repo, or file names); check: all")
    parser.add_argument("--repo", type=Path, default=DEFAULT_REPO)
    parser.add_argument("--glob", default="src/*/ops/*.py")
    parser.add_argument("--tests", choices=("found", "own"), default="found", help="check: the tests found, or the "
                        "module's own test file (test_<module>.py) where one is found")  # fmt: skip
    parser.add_argument("--backend", choices=("auto", "gpu", "interpreter"), default="auto")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per module")
    parser.add_argument("--jobs", type=int, default=4, help="check: a module's test files in jobs at once")
    parser.add_argument("--budget-s", type=float, default=None, help="check: a budget per run of a module's tests")
    parser.add_argument("--search-s", type=float, default=120.0, help="optimize: the launch search's budget")
    parser.add_argument("--out", type=Path, help="write the rows here as JSON")
    args = parser.parse_intermixed_args(argv)
    if args.mode == "optimize" and not args.modules:
        parser.error("optimize: name the modules")
    if not args.repo.is_dir():
        parser.error(f"--repo {args.repo}: no such folder")
    if args.mode == "check":
        print(f"{'module':<48} {'tests':>5} {'passed':>9} {'seconds':>8} {'verdict':<14} why")
        report = asyncio.run(check_all(args))
        rows = report["modules"]
        print(f"{sum(r['verdict'] == 'pass' for r in rows)} of {len(rows)} module(s) pass against themselves on "
              f"{report['runtime'].get('device')}")  # fmt: skip
    else:
        report = asyncio.run(optimize_all(args))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
