"""Prompt sizes over the benchmark suites: the characters of each generate prompt, before (the whole test section
and every knowledge section) and after (the test trimmed to what the checks and the timing run, the knowledge chosen
by the kernel's family, within ``prompts.PROMPT_CHARS``), per suite, with how many prompts needed knowledge cut or the
test's helpers' bodies left out. Reads ``../shared/suites`` (or ``--suites DIR``); needs no GPU and no model.

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
LIMIT = prompts.PROMPT_CHARS


def sizes(path: Path, device: str, backend: str, arch: str) -> tuple[int, int, bool, bool]:
    """(before, after, knowledge cut, helpers' bodies left out) for the generate prompt of one file, with the launch
    search to follow. Before: the same prompt with the whole test section and every knowledge section, no budget.
    After: as the loop sends it (``prompts.PROMPT_CHARS``); without a GPU's timed calls, which add a line each."""
    original = read_triton_file(path)
    knowledge = knowledge_for(backend, arch)
    chosen = for_code(knowledge, original.kernel_section)
    ctx = prompts.Context(original, device, chosen, True, search_after=True)
    after = prompts.generate(ctx, original.kernel_section, None)
    whole = prompts.Context(original, device, knowledge, True, search_after=True, budget=None)
    before = prompts.size(prompts.generate(whole, original.kernel_section, None))
    before += len(original.test_section) - len(whole.trimmed_test)
    user = after[-1]["content"]
    cut = chosen.strip() not in user
    helpers = ctx.test_excerpts[0] not in user
    return before, prompts.size(after), cut, helpers


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
        cut, helpers = sum(row[3] for row in rows), sum(row[4] for row in rows)
        print(f"  within {LIMIT // 1000} k by cutting knowledge in {cut}, and the test's helpers' bodies in {helpers}")
        if args.files:
            for name, before, after, cut, helpers in sorted(rows, key=lambda r: -r[2]):
                gave = [w for w, said in (("knowledge cut", cut), ("helpers' bodies left out", helpers)) if said]
                print(f"    {name:45} {before:6} -> {after:6}  {', '.join(gave)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
