"""One rendered prompt of each kind the GEAK loop sends, for one suite file, as ``docs/agent.md`` shows them: the
system prompt, generate, generate from an instruction, optimizer (the strategy), implement, reflect (on wrong outputs)
and the retry of a reply without usable code. Long code blocks and the knowledge are shortened with a visible
``[... N characters of ... ]`` marker. The timings are made up for the illustration (a run fills them from the GPU's
measurements); everything else is what the prompts module renders. Needs no GPU and no model.

    .venv/bin/python benchmarks/render_prompts.py [--suites ../shared/suites]           # print the markdown
    .venv/bin/python benchmarks/render_prompts.py --write docs/agent.md                 # replace it there
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from geak.agent import prompts
from geak.agent.chain_aims import chain_aim
from geak.agent.knowledge import for_code, knowledge_for
from geak.agent.memory import Candidate, Evaluation
from geak.evaluator import CallCost, read_triton_file

SUITE_FILE = "rocm/ROCm_v1/naive_softmax.py"
INSTRUCTIONS = "rocm/ROCm_eval_complex_instruct_v1.json"
DEVICE = "AMD Instinct MI300X (rocm, gfx942)"
BEGIN = "<!-- BEGIN rendered prompts: benchmarks/render_prompts.py --write docs/agent.md -->"
END = "<!-- END rendered prompts -->"
LONG = 1200  # characters: a longer code block or knowledge is shortened...
SHOWN = 600  # ...to its first lines of about this many characters
# The prompt sections that can follow the knowledge (whose own sections are headed `## ` too).
AFTER_KNOWLEDGE = ("## A related", "## The unit test", "## This attempt's aim", "## Your job")
DEFAULT_SUITES = Path(__file__).resolve().parents[1].parent / "shared/suites"
# Made-up figures for the illustration: the original's timed calls on an MI300X, and a first candidate.
CALLS = (
    CallCost("softmax(x=f16[8192, 8192])", 268435456, None, None, 0.1160, 43.7, None, "latency",
             "latency-bound: only 44% of the copy bandwidth (too few programs in flight, or stalls that more "
             "wavefronts or stages would hide)"),
    CallCost("softmax(x=f16[4096, 1024])", 16777216, None, None, 0.0139, 22.8, None, "latency",
             "13.9 µs a call: launch-bound (23% of the copy bandwidth)"),
)  # fmt: skip
DIAGNOSIS = (
    "softmax(x=f16[8192, 8192]): latency-bound: only 44% of the copy bandwidth; softmax_kernel: 4 wavefronts, "
    "1 stages, 64 VGPRs/lane, occupancy 100% (wavefronts)"
)


def context(suites: Path) -> prompts.Context:
    original = read_triton_file(suites / SUITE_FILE)
    knowledge = for_code(knowledge_for("rocm", "gfx942"), original.kernel_section)
    return prompts.Context(
        original, DEVICE, knowledge, True, diagnosis=DIAGNOSIS, baseline_ms=sum(c.ms or 0 for c in CALLS),
        timed_calls=CALLS, search_after=True,
    )  # fmt: skip


def rendered(suites: Path) -> str:
    """The markdown between ``BEGIN`` and ``END``: each kind's messages, shortened."""
    ctx = context(suites)
    code = ctx.original.kernel_section
    aim = chain_aim(0, CALLS, code)
    timed = Evaluation(True, "perf", "", timed=True, latency_ms=0.1010, speedup=1.2861, speedup_low=1.2702,
                       speedup_high=1.3020, speedup_verdict="faster", pct_peak_bw=50.2)  # fmt: skip
    first = Candidate("c0.1", 0, 0, "generate", code, evaluation=timed, strategy="One program per row, 8 wavefronts.")
    baseline = Evaluation(True, "perf", "", timed=True, latency_ms=ctx.baseline_ms, speedup=1.0)
    baseline.speedup_verdict = "the baseline"
    original = Candidate("original", -1, 0, "original", code, evaluation=baseline)
    strategy = "1. Process two rows per program.\n2. Load each row once with a wider vector and keep it in registers."
    wrong = Candidate(
        "c0.2", 0, 1, "optimize", code, parent="c0.1", strategy=strategy,
        evaluation=Evaluation(False, "exec", "call 1 (softmax(x=f16[1823, 781])): output 0 differs from the reference "
                              "at 12,480 of 1,423,763 elements (max abs diff 0.0312 at [0, 780])"),
    )  # fmt: skip
    cut = Candidate("c0.3", 0, 2, "reflect", "", parent="c0.2", strategy=strategy, note="the reply was cut off")
    cut.evaluation = Evaluation(False, "reply", "no usable code in the reply: the reply was cut off")
    kinds = [  # (title, the prompt, the prompt as shown)
        ("generate (first attempt; chain 1 of 2)", prompts.generate(ctx, code, None, aim=aim)),
        ("optimizer: the strategy", prompts.optimizer(ctx, [original, first], prompts.ledger([first]), aim=aim)),
        ("implement the strategy", prompts.implement(ctx, first, strategy, None, aim)),
        ("reflect (wrong outputs)", prompts.reflect(ctx, wrong, None, [], reference=code)),
        ("a reply without usable code, asked again", prompts.reflect_on_reply(ctx, cut, code, None, None)),
    ]
    kinds = [(title, messages, messages) for title, messages in kinds]
    instruction = _instruction(suites)
    if instruction:  # shown cut: it holds code blocks of its own
        shown = instruction[:SHOWN].rstrip() + f"\n[... {len(instruction) - SHOWN} characters of the instruction ...]"
        title = "generate mode: from the instruction"
        kinds.append(
            (title, prompts.from_instruction(ctx, instruction, None), prompts.from_instruction(ctx, shown, None))
        )
    parts = [f"Rendered for `{SUITE_FILE}` on an {DEVICE.split(' (')[0]} (made-up timings).", ""]
    for title, full, messages in kinds:
        parts.append(f"#### {title}: {prompts.size(full):,} characters")
        for message in messages:
            if message["role"] == "system" and title != kinds[0][0] and message["content"] == _system(kinds):
                parts += ["", "*system*: as above", ""]
                continue
            parts += ["", f"*{message['role']}*:", "", "````text", shortened(message["content"]), "````", ""]
    return "\n".join(parts).rstrip() + "\n"


def _system(kinds: list) -> str:
    return kinds[0][2][0]["content"]


def _instruction(suites: Path) -> str | None:
    path = suites / INSTRUCTIONS
    if not path.is_file():
        return None
    name = Path(SUITE_FILE).name
    return next((item["instruction"] for item in json.loads(path.read_text()) if item.get("file") == name), None)


def shortened(text: str) -> str:
    """`text` with each code block, and the knowledge, longer than ``LONG`` characters cut to its first lines and a
    marker that says what was left out."""
    out: list[str] = []
    lines = text.split("\n")
    heading, i = "", 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            heading = line
        if line.startswith("```"):
            end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), len(lines) - 1)
            out += [line, *_cut(lines[i + 1 : end], _what(heading)), lines[end]]
            i = end + 1
            continue
        if line == "## Knowledge":
            end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith(AFTER_KNOWLEDGE)), len(lines))
            out += [line, *_cut(lines[i + 1 : end], "knowledge"), ""]
            i = end
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


def _cut(block: list[str], what: str) -> list[str]:
    text = "\n".join(block)
    if len(text) <= LONG:
        return block
    kept: list[str] = []
    while len("\n".join(kept)) < SHOWN:
        kept.append(block[len(kept)])
    return [*kept, f"[... {len(text) - len(chr(10).join(kept))} characters of {what} ...]"]


def _what(heading: str) -> str:
    for start, what in (("## The unit test", "the test"), ("## The reference", "the reference"),
                        ("## A related", "the example")):  # fmt: skip
        if heading.startswith(start):
            return what
    return "the code"


def with_rendered(doc: str, block: str) -> str:
    """`doc` with the text between ``BEGIN`` and ``END`` replaced by `block`."""
    head, _, rest = doc.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n{block}{END}{tail}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suites", type=Path, default=DEFAULT_SUITES)
    parser.add_argument("--write", type=Path, metavar="DOC", help="replace the rendered prompts in DOC (markdown)")
    args = parser.parse_args()
    if not (args.suites / SUITE_FILE).is_file():
        print(f"no {SUITE_FILE} in {args.suites} (give --suites DIR)", file=sys.stderr)
        return 2
    block = rendered(args.suites)
    if args.write is None:
        print(block, end="")
        return 0
    doc = args.write.read_text() if args.write.is_file() else ""
    if doc.count(BEGIN) != 1 or doc.count(END) != 1:
        print(f"{args.write} needs one {BEGIN!r} and one {END!r} line", file=sys.stderr)
        return 2
    args.write.write_text(with_rendered(doc, block))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
