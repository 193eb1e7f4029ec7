"""Prompt sizes over the benchmark suites: the characters of each generate prompt, before (the whole test section
and every knowledge section) and after (the test trimmed to what the checks and the timing run, the knowledge chosen
by the kernel's family), per suite. Reads ``../shared/suites`` (or ``--suites DIR``); needs no GPU and no model.

    .venv/bin/python benchmarks/prompt_sizes.py [--suites ../shared/suites] [--files]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from geak.agent import prompts
from geak.agent.knowledge import for_code, knowledge_for
from geak.evaluator.triton_file import TritonFileError, read_triton_file

SUITES = {  # suite folder, the device its prompts are rendered for
    "rocm/ROCm_v1": ("AMD Instinct MI300X (rocm, gfx942)", "rocm", "gfx942"),
    "tritonbench_revised/TritonBench_G_v1": ("NVIDIA H100 80GB HBM3 (cuda, sm_90)", "cuda", "sm_90"),
}
LIMIT = 20_000


def sizes(path: Path, device: str, backend: str, arch: str) -> tuple[int, int]:
    """(before, after) characters of the generate prompt for one file, with the launch search to follow. Before: the
    same prompt with the whole test section and every knowledge section, as prompts carried them (each appears once
    in a generate prompt)."""
    original = read_triton_file(path)
    knowledge = knowledge_for(backend, arch)
    chosen = for_code(knowledge, original.kernel_section)
    ctx = prompts.Context(original, device, chosen, True, search_after=True)
    after = sum(len(m["content"]) for m in prompts.generate(ctx, original.kernel_section, None))
    before = after + len(original.test_section) - len(ctx.trimmed_test) + len(knowledge.strip()) - len(chosen.strip())
    return before, after


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suites", type=Path, default=Path(__file__).resolve().parents[1].parent / "shared/suites")
    parser.add_argument("--files", action="store_true", help="print each file's sizes too")
    args = parser.parse_args()
    if not args.suites.is_dir():
        print(f"no suites folder at {args.suites} (give --suites DIR)", file=sys.stderr)
        return 2
    for suite, (device, backend, arch) in SUITES.items():
        rows = []
        for path in sorted((args.suites / suite).glob("*.py")):
            try:
                rows.append((path.name, *sizes(path, device, backend, arch)))
            except (TritonFileError, SyntaxError) as e:
                print(f"  {path.name}: not a Triton file here ({e})", file=sys.stderr)
        if not rows:
            print(f"{suite}: no files")
            continue
        print(f"{suite}: {len(rows)} generate prompts, characters before -> after")
        for label, column in (("before", 1), ("after", 2)):
            values = [row[column] for row in rows]
            over = sum(v > LIMIT for v in values)
            print(
                f"  {label:6} min {min(values):6}  median {statistics.median(values):8.0f}  max {max(values):6}  "
                f"over {LIMIT // 1000} k: {over}"
            )
        if args.files:
            for name, before, after in sorted(rows, key=lambda r: -r[2]):
                print(f"    {name:45} {before:6} -> {after:6}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
