"""The prompts of the GEAK loop: Generator, Reflector and Optimizer (chat messages for any OpenAI-style model)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from geak.evaluator import DEFAULT_TOLERANCES, CallCost, Tolerance, TritonFile

from .chain_aims import Aim
from .contract import Contract, contract_of
from .edit_blocks import FORMAT as EDIT_FORMAT
from .knowledge import fit
from .memory import Candidate
from .trimmed_test import trimmed_test

Messages = list[dict[str, str]]
MAX_ERROR_CHARS = 4000
MAX_CALLS_SHOWN = 12  # timed calls listed in a prompt (a ROCm benchmark times dozens of shapes)
MAX_LEDGER_LINES = 24  # attempts listed in a prompt, the latest
LEDGER_TEXT_CHARS = 160  # of a strategy, a failure or a reflection in one ledger line
# A prompt's characters (system and user together) where it has a choice: a model reads a prompt of this size whole
# and attends to it; past it, knowledge sections, the one-shot example and the bodies of the test's input helpers give
# way (``_within_budget``), never the contract, the code, the facts or the tests.
PROMPT_CHARS = 20_000


@dataclass(frozen=True)
class Context:
    """What every prompt about one problem shares."""

    original: TritonFile
    device: str  # e.g. "NVIDIA H200 (cuda, sm_90)" or "no GPU: Triton interpreter"
    knowledge: str
    timing: bool
    focus: str | None = None  # the one kernel to optimize (None: all of them)
    diagnosis: str = ""  # why the original is slow: its calls on the roofline, its kernels' compile facts
    baseline_ms: float | None = None  # the original's total over its timed calls
    timed_calls: tuple[CallCost, ...] = ()  # the original's timed calls (signatures with shapes, times)
    fresh_inputs: bool = True  # outputs are also compared on fresh random values
    probe_variants: bool = True  # and at other sizes and value ranges
    search_after: bool = False  # launch configurations are tuned by measurement after the model's rounds
    tolerances: Mapping[str, Tolerance] = field(default_factory=dict)  # the evaluator's overrides of its defaults
    budget: int | None = PROMPT_CHARS  # None: every section whole, whatever the length
    edits: bool = False  # the model replies with SEARCH/REPLACE blocks (diff mode), not whole modules

    @property
    def module(self) -> str:
        """What a reply ends with: the complete module, or (diff mode) the edit blocks."""
        return "your edits as SEARCH/REPLACE blocks" if self.edits else "the complete module"

    @cached_property
    def contract(self) -> Contract:
        return contract_of(self.original)

    @cached_property
    def trimmed_test(self) -> str:
        return trimmed_test(self.original)

    @cached_property
    def test_excerpts(self) -> tuple[str, str]:
        """The trimmed test, then the same with the bodies of its input helpers left out (for a tight budget)."""
        return self.trimmed_test, trimmed_test(self.original, helper_bodies=False)


def system_prompt(ctx: Context) -> str:
    return (
        "You are an expert Triton GPU kernel engineer. You write correct, fast Triton kernels "
        f"for {ctx.device}.\n"
        "Rules for every module you write:\n"
        "- Keep these with the same names and signatures (a fixed unit test uses them):\n"
        f"{ctx.contract.describe()}\n"
        "- The work must be done by @triton.jit kernels launched from the wrappers: no PyTorch compute "
        "fallbacks, no try/except around launches, no side streams or threads.\n"
        + (
            "- Change the code you are given by SEARCH/REPLACE blocks (the format is below), not by writing the "
            "whole module again. Do not add tests or benchmarks.\n"
            if ctx.edits
            else "- Write ONE complete, self-contained Python module (imports, kernels, wrappers) in a single "
            "```python block. Do not include tests or benchmarks.\n"
        )
        + "- Masks on every load and store that can go out of bounds; block sizes as tl.constexpr powers of two; "
        "use only features of Triton 3.2 to 3.9 (no tl.make_block_ptr, no tensor descriptors)."
        + (
            f"\n- Optimize the kernel `{ctx.focus}` (and how its wrapper launches it); keep the other kernels as "
            "they are."
            if ctx.focus
            else ""
        )
        + (f"\n\n## Reply format\n{EDIT_FORMAT}" if ctx.edits else "")
    )


def _fence(code: str) -> str:
    return f"```python\n{code.rstrip()}\n```"


def _facts(ctx: Context) -> str:
    """What is measured and checked, and what is left to the search: the facts a kernel engineer asks first."""
    names = ctx.original.timed_functions
    timed = (", ".join(f"`{name}`" for name in names) or "the test") + (" makes" if len(names) == 1 else " make")
    lines = []
    if ctx.timing:
        total = f"; the original takes {ctx.baseline_ms:.4f} ms in total" if ctx.baseline_ms else ""
        lines.append(f"- Objective: the total time of all calls that {timed}{total}. Every call counts.")
    else:
        lines.append(f"- Speed is not measured here; on a GPU, the objective is the total time of the calls {timed}.")
    calls = [c for c in ctx.timed_calls if c.ms]
    if calls:
        lines.append("- The original's timed calls (argument shapes and dtypes, time, what bounds them):")
        for c in calls[:MAX_CALLS_SHOWN]:
            why = c.why if c.why.startswith(c.bound) else f"{c.bound}-bound" + (f" ({c.why})" if c.why else "")
            lines.append(f"  - `{c.signature}`: {c.ms:.4f} ms, {why}")
        if len(calls) > MAX_CALLS_SHOWN:
            lines.append(f"  - and {len(calls) - MAX_CALLS_SHOWN} more")
    check = "on the test's inputs"
    if ctx.fresh_inputs:
        check += ", on fresh random values"
    if ctx.probe_variants:
        check += ", at other sizes and on other value ranges"
    lines.append(
        f"- Correctness: your outputs are compared with the original's {check}; code that is right only at the "
        "tested shapes or values fails."
    )
    lines.append(tolerances(ctx))
    if ctx.search_after:
        lines.append(
            "- Block sizes, num_warps and num_stages are tuned by measurement after you (a launch-configuration "
            "search): do not spend the attempt on them; change the algorithm, memory access, fusion or the work per "
            "program instead."
            + (
                " The launches the test makes itself keep the test's configuration."
                if ctx.contract.launched_by_test
                else ""
            )
        )
    return "## What is measured and checked\n" + "\n".join(lines)


def tolerances(ctx: Context) -> str:
    """The comparison's tolerances as the evaluator applies them (its defaults, with this run's overrides)."""
    table = {**DEFAULT_TOLERANCES, **ctx.tolerances}
    floats = "; ".join(f"{dtype} rtol {t.rtol:g}, atol {t.atol:g}" for dtype, t in table.items())
    return (
        "- Tolerances, per output element: |yours - original| <= atol * RMS(original output) + rtol * |original| "
        f"(plus a tiny floor for all-zero outputs), by dtype: {floats} (every float8 type as float8); integers and "
        "booleans exactly; NaN and infinities only where the original has them. The test's own assertions run too."
    )


def aim_section(aim: Aim | None) -> str:
    """What one of several parallel chains is aimed at, or ''."""
    if aim is None:
        return ""
    return (
        f"## This attempt's aim: {aim.name}\nSeveral independent attempts work on this code in parallel, each on "
        f"another bottleneck. This one is aimed at {aim.name}: {aim.direction}. Look for the gain in this direction "
        "first (the original's measurements ranked the aims).\n\n"
    )


def _shared_sections(ctx: Context, knowledge: str, one_shot: str | None, test: str, facts: bool) -> str:
    parts = [_facts(ctx)] if facts else []
    if knowledge:
        parts.append(f"## Knowledge\n{knowledge.strip()}")
    if one_shot:
        parts.append(f"## A related, well-written Triton kernel (for reference only)\n{_fence(one_shot)}")
    parts.append(
        "## The unit test (fixed: it is re-attached to your code; shown here trimmed to what the checks and the "
        f"timing run)\n{_fence(test)}"
    )
    return "\n\n".join(parts)


def size(messages: Messages) -> int:
    return sum(len(m["content"]) for m in messages)


def _within_budget(
    ctx: Context, one_shot: str | None, build: Callable[[str], Messages], *, facts: bool = False
) -> Messages:
    """`build(shared sections)` with the richest shared sections that keep the prompt within `ctx.budget`: the test
    with its helpers' bodies (without them where the prompt is too long even so), then as much knowledge as fits
    (``knowledge.fit``), then the one-shot example where it fits whole."""
    whole = ctx.test_excerpts[0]
    if ctx.budget is None:
        return build(_shared_sections(ctx, ctx.knowledge, one_shot, whole, facts))
    for test in ctx.test_excerpts:
        messages = build(_shared_sections(ctx, "", None, test, facts))
        if size(messages) <= ctx.budget:
            break
    knowledge = fit(ctx.knowledge, ctx.budget - size(messages) - len("## Knowledge\n\n\n"))
    if knowledge:
        messages = build(_shared_sections(ctx, knowledge, None, test, facts))
    if one_shot:
        with_example = build(_shared_sections(ctx, knowledge, one_shot, test, facts))
        messages = with_example if size(with_example) <= ctx.budget else messages
    return messages


def _rewrite_task(ctx: Context) -> str:
    goal = "faster" if ctx.timing else "correct and efficient (no GPU is visible, so speed cannot be measured)"
    return f"Rewrite this Triton code so that it stays correct and becomes {goal} on {ctx.device}."


def _numbered(code: str) -> str:
    """`code` with its line numbers (those of the check's messages), in a plain fence: for reading, not copying."""
    lines = code.rstrip().split("\n")
    width = len(str(len(lines)))
    return "```\n" + "\n".join(f"{i:>{width}}| {line}" for i, line in enumerate(lines, 1)) + "\n```"


def _one_line(text: str) -> str:
    """The first line of `text` that is not a heading, shortened for a ledger."""
    line = next((t.strip() for t in text.splitlines() if t.strip() and not t.lstrip().startswith("#")), "")
    return line if len(line) <= LEDGER_TEXT_CHARS else line[: LEDGER_TEXT_CHARS - 3].rstrip() + "..."


def ledger_line(c: Candidate) -> str:
    """One attempt: where it came from, what it tried, how it ended, and why."""
    ev = c.evaluation
    came = f"{c.origin} from {c.parent}" if c.parent else c.origin
    parts = [f"{c.id} ({came})"]
    if c.strategy:
        parts.append(f"strategy: {_one_line(c.strategy)}")
    if ev is not None and ev.ok and ev.speedup:
        verdict = f", {ev.speedup_verdict}" if ev.speedup_verdict else ""
        parts.append(f"correct, {ev.speedup:.2f}x the original's speed{verdict}")
    elif ev is not None and ev.ok:
        parts.append("correct (not timed)")
    elif ev is not None:
        parts.append(f"failed at the {ev.stage} stage: {_one_line(ev.message or c.note)}")
    if c.reflection:
        parts.append(f"its diagnosis: {_one_line(c.reflection)}")
    return "- " + "; ".join(parts)


def ledger(candidates: list[Candidate]) -> str:
    """The attempts so far (the model's, the latest `MAX_LEDGER_LINES`), one line each, or ''."""
    model = [c for c in candidates if c.origin in ("generate", "reflect", "optimize")]
    if not model:
        return ""
    omitted = f"- ({len(model) - MAX_LEDGER_LINES} earlier attempts omitted)\n" if len(model) > MAX_LEDGER_LINES else ""
    return omitted + "\n".join(ledger_line(c) for c in model[-MAX_LEDGER_LINES:])


def generate(ctx: Context, code: str, one_shot: str | None, note: str = "", aim: Aim | None = None) -> Messages:
    """First attempt, or a fresh start: rewrite the original for speed (in the direction of `aim`, one of several
    parallel chains')."""

    def build(shared: str) -> Messages:
        user = (
            f"## Task\n{_rewrite_task(ctx)}\n"
            + (f"{note}\n" if note else "")
            + f"\n{aim_section(aim)}## Current code\n{_fence(code)}\n\n{shared}\n\n"
            f"Reply with a short analysis of the bottleneck and your plan, then {ctx.module}."
        )
        return [{"role": "system", "content": system_prompt(ctx)}, {"role": "user", "content": user}]

    return _within_budget(ctx, one_shot, build, facts=True)


def from_instruction(ctx: Context, instruction: str, one_shot: str | None, note: str = "") -> Messages:
    """Generate mode (the paper's setting): write the module from the task's instruction alone."""

    def build(shared: str) -> Messages:
        user = (
            f"## Task\n{instruction.strip()}\n" + (f"{note}\n" if note else "") + f"\n{shared}\n\n"
            "Reply with a short plan, then the complete module."
        )
        return [{"role": "system", "content": system_prompt(ctx)}, {"role": "user", "content": user}]

    return _within_budget(ctx, one_shot, build, facts=True)


def reflect(
    ctx: Context, failed: Candidate, one_shot: str | None, tried: list[Candidate] = (), reference: str | None = None
) -> Messages:
    """Reflexion: explain the failure from its trace, then fix it. `tried`: this line of attack's failed attempts so
    far, oldest first, each with its diagnosis; `reference`: the code whose outputs must be matched (on wrong
    outputs)."""
    ev = failed.evaluation
    error = (ev.message if ev else failed.note) or "no usable code in the reply"
    details = "\n".join(
        f"line {d['line']}: {d['message']}" for d in (ev.diagnostics if ev else [])[:6] if d.get("message")
    )
    report = f"{error}\n{details}".strip()[:MAX_ERROR_CHARS]
    stage = ev.stage if ev else "reply"
    notes = "".join(f"- {note}\n" for note in (ev.notes if ev else []))
    history = "\n".join(ledger_line(c) for c in tried)
    wrong = f"## How outputs are compared\n{tolerances(ctx)[2:]}\n\n" if stage == "exec" else ""

    def build(shared: str) -> Messages:
        user = (
            f"## Task\n{_rewrite_task(ctx)} Your previous attempt failed; fix it.\n\n"
            f"## Your previous attempt failed at the {stage} stage\n```\n{report}\n```\n\n"
            + (f"## What the check noted\n{notes}\n" if notes else "")
            + wrong
            + (f"## Fixes already tried on this line of attack (do not repeat them)\n{history}\n\n" if history else "")
            + "## The code that failed (line numbers added for reference; do not copy them)\n"
            f"{_numbered(failed.code)}\n\n"
            + (f"## The reference, whose outputs yours must match\n{_fence(reference)}\n\n" if reference else "")
            + f"{shared}\n\n"
            "First write a section '## Reflection': the root cause of the failure, traced to the code, and what "
            f"must change. Then give {ctx.module if ctx.edits else 'the complete corrected module'}."
        )
        return [{"role": "system", "content": system_prompt(ctx)}, {"role": "user", "content": user}]

    return _within_budget(ctx, one_shot, build)


def reflect_on_reply(
    ctx: Context, failed: Candidate, start: str | None, instruction: str | None, one_shot: str | None
) -> Messages:
    """The previous reply had no usable code (cut off, a function missing, no code block): the task again, with the
    code to start from (`start`; in generate mode, None and the `instruction`) and the strategy it was to follow."""
    why = (failed.evaluation.message if failed.evaluation else "") or failed.note or "no usable code in the reply"
    task = instruction.strip() if instruction is not None else _rewrite_task(ctx)
    strategy = f"## The strategy to implement\n{failed.strategy.strip()}\n\n" if failed.strategy else ""
    code = f"## The code to start from\n{_fence(start)}\n\n" if start is not None else ""

    def build(shared: str) -> Messages:
        user = (
            f"## Your previous reply could not be used\n{why}\n"
            f"Keep the analysis short, so that {ctx.module} {'fit' if ctx.edits else 'fits'} in the reply.\n\n"
            f"## Task\n{task}\n\n{strategy}{code}{shared}\n\n"
            f"Reply with one or two sentences on your plan, then {ctx.module}."
        )
        return [{"role": "system", "content": system_prompt(ctx)}, {"role": "user", "content": user}]

    return _within_budget(ctx, one_shot, build, facts=True)


def optimizer(
    ctx: Context, ancestors: list[Candidate], attempts: str = "", avoid: str = "", aim: Aim | None = None
) -> Messages:
    """The LLM as optimizer: past (code, latency) pairs, slowest first, so the direction of improvement shows (the
    original among them, at 1.00x), and the ledger of every attempt so far (`attempts`); `aim`: the bottleneck this
    chain, one of several, is aimed at."""
    ordered = sorted(ancestors, key=lambda c: -(c.evaluation.sort_key if c.evaluation else 0.0))
    blocks = []
    for c in ordered:
        ev = c.evaluation
        figures = [f"{ev.latency_ms:.4f} ms" if ev and ev.latency_ms else "time unknown"]
        if ev and ev.speedup:
            verdict = f" ({ev.speedup_verdict})" if ev.speedup_verdict else ""
            figures.append(f"speedup {ev.speedup:.2f}x over the original{verdict}")
        if ev and ev.pct_peak_bw:
            figures.append(f"{ev.pct_peak_bw:.0f}% of peak bandwidth")
        if ev and ev.pct_peak_flops:
            figures.append(f"{ev.pct_peak_flops:.0f}% of peak TFLOP/s")
        blocks.append(f"### Candidate {c.id} ({c.origin}): {', '.join(figures)}\n{_fence(c.code)}")
    base = f"The original takes {ctx.baseline_ms:.4f} ms. " if ctx.baseline_ms else ""
    why = f"Why the original is slow, as measured: {ctx.diagnosis}\n" if ctx.diagnosis else ""
    search = (
        " Block sizes, num_warps and num_stages are tuned by measurement afterwards: plan changes of algorithm, "
        "memory access, fusion or work per program instead."
        if ctx.search_after
        else ""
    )
    aimed = f" The plan must be aimed at {aim.name} (see the aim above)." if aim else ""

    def build(knowledge: str) -> Messages:
        user = (
            f"## Measured candidates on {ctx.device}, slowest first\n{base}\n{why}\n"
            + "\n\n".join(blocks)
            + "\n\n"
            + (f"## Every attempt so far, oldest first\n{attempts}\n\n" if attempts else "")
            + (f"## Knowledge\n{knowledge.strip()}\n\n" if knowledge else "")
            + aim_section(aim)
            + "## Your job\nAnalyse why the faster candidates are faster and what limits the fastest one (memory- or "
            "compute-bound? compare its efficiency with the peak). Then write a section '## Strategy': a concrete, "
            "numbered plan for the next version that should be faster still, different from the attempts that "
            f"failed or did not pay. Do not write code.{search}{aimed}"
            + (
                f"\nThe last line of attack failed repeatedly; choose a clearly different approach than:\n{avoid}"
                if avoid
                else ""
            )
        )
        return [
            {"role": "system", "content": "You are an expert GPU performance engineer who reads measurements."},
            {"role": "user", "content": user},
        ]

    if ctx.budget is None:
        return build(ctx.knowledge)
    return build(fit(ctx.knowledge, ctx.budget - size(build("")) - len("## Knowledge\n\n\n")))


def implement(ctx: Context, base: Candidate, strategy: str, one_shot: str | None, aim: Aim | None = None) -> Messages:
    """The Generator, writing code from the Optimizer's strategy."""
    task = (
        f"## Task\nImplement this optimization strategy on the code below (currently "
        f"{base.evaluation.latency_ms:.4f} ms).\n"
        if base.evaluation and base.evaluation.latency_ms
        else "## Task\nImplement this optimization strategy on the code below.\n"
    )

    def build(shared: str) -> Messages:
        user = task + (
            f"\n{aim_section(aim)}## Strategy\n{strategy.strip()}\n\n## Code\n{_fence(base.code)}\n\n{shared}\n\n"
            f"Reply with one sentence on what you changed, then {ctx.module}."
        )
        return [{"role": "system", "content": system_prompt(ctx)}, {"role": "user", "content": user}]

    return _within_budget(ctx, one_shot, build, facts=True)
