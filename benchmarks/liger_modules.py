"""Liger-Kernel's op modules, each checked against itself by the repository's own tests (`geak check MODULE
--against-self`, as a user runs it), with a table of what was found, what passed and how long it took.

    python benchmarks/liger_modules.py --out report/liger                                  # every op module, GPU
    python benchmarks/liger_modules.py --tests own --backend interpreter softmax geglu     # CPU: their own test files

Modules: the names given, else every `src/liger_kernel/ops/*.py` with `@triton.jit` kernels. Tests: `found` (GEAK's
search through the imports, the default) or `own` (the module's `test/transformers/test_<name>.py`, where there is
one). Each module is one `geak check --json` process, one after another, so the seconds are what a user waits for.
Prints a table and writes `results.json` (each module's verdict, cases by kind, found tests, seconds) under --out.
A "not checkable" verdict is neither a pass nor a fail: it says why (exit 3 of `geak check`); "error" is exit 2 (no
test found, or the module fails its own tests as the reference), with the reason.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from geak.evaluator import needs_repository_tests

DEFAULT_LIGER = Path(__file__).resolve().parents[2] / "shared" / "repos" / "liger-kernel"


def modules(liger: Path, names: list[str]) -> list[Path]:
    ops = liger / "src" / "liger_kernel" / "ops"
    if names:
        paths = [ops / f"{n.removesuffix('.py')}.py" for n in names]
        missing = [str(p) for p in paths if not p.is_file()]
        if missing:
            sys.exit(f"no such module: {', '.join(missing)}")
        return paths
    return [p for p in sorted(ops.glob("*.py")) if p.name != "__init__.py" and needs_repository_tests(p)]


def check(module: Path, liger: Path, tests: str, backend: str, timeout_s: int) -> dict:
    command = [sys.executable, "-m", "geak.server.cli", "check", str(module), "--against-self", "--json",
               "--backend", backend, "--timeout", str(timeout_s), "--no-service"]  # fmt: skip
    own = liger / "test" / "transformers" / f"test_{module.stem}.py"
    if tests == "own" and own.is_file():
        command += ["--tests", str(own)]
    started = time.perf_counter()
    p = subprocess.run(command, capture_output=True, text=True, cwd=liger)
    seconds = round(time.perf_counter() - started, 1)
    try:
        result = json.loads(p.stdout)
    except json.JSONDecodeError:
        tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
        return {"module": module.stem, "exit": p.returncode, "seconds": seconds, "verdict": "error", "why": tail}
    if "error" in result:  # exit 2: no test found, or a reference that fails its own tests
        return {"module": module.stem, "exit": p.returncode, "seconds": seconds, "verdict": "error",
                "why": result["error"]}  # fmt: skip
    kinds = Counter(t.get("kind") for t in result.get("tests", []))
    verdict = "not checkable" if result.get("not_checkable") else "pass" if result.get("ok") else "fail"
    found = result.get("repository_tests", {})
    return {
        "module": module.stem,
        "exit": p.returncode,
        "seconds": seconds,
        "verdict": verdict,
        "tests": len(found.get("tests", [])),
        "tests_from": "own file" if tests == "own" and own.is_file() else found.get("source", ""),
        "cases": dict(kinds),
        "message": result.get("message", ""),
        "device": result.get("device"),
    }


def table(rows: list[dict]) -> str:
    lines = ["| module | tests | from | cases | verdict | seconds |", "|---|---|---|---|---|---|"]
    for r in rows:
        cases = ", ".join(f"{n} {k}" for k, n in sorted(r.get("cases", {}).items()))
        verdict = r["verdict"] if r["verdict"] == "pass" else f"{r['verdict']}: {r.get('message') or r.get('why')}"
        lines.append(f"| {r['module']} | {r.get('tests', '')} | {r.get('tests_from', '')} | {cases} | "
                     f"{verdict[:160]} | {r['seconds']} |")  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("modules", nargs="*", help="op module names (rms_norm, swiglu...); default: every one")
    parser.add_argument("--liger", type=Path, default=DEFAULT_LIGER, help="the Liger-Kernel checkout")
    parser.add_argument("--tests", choices=("found", "own"), default="found")
    parser.add_argument("--backend", choices=("auto", "gpu", "interpreter"), default="auto")
    parser.add_argument("--timeout", type=int, default=1800, help="time limit of one run of a module's tests (s)")
    parser.add_argument("--out", type=Path, default=Path("report/liger"))
    args = parser.parse_args()
    if not (args.liger / "src" / "liger_kernel" / "ops").is_dir():
        sys.exit(f"{args.liger}: not a Liger-Kernel checkout (no src/liger_kernel/ops)")
    rows = []
    for module in modules(args.liger, args.modules):
        rows.append(check(module, args.liger, args.tests, args.backend, args.timeout))
        print(f"{module.stem}: {rows[-1]['verdict']} in {rows[-1]['seconds']} s", file=sys.stderr, flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(rows, indent=1))
    print(table(rows))
    print(f"\n{args.out / 'results.json'}")


if __name__ == "__main__":
    main()
