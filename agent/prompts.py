"""The prompts of the GEAK loop: Generator, Reflector and Optimizer (chat messages for any OpenAI-style model)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from geak.evaluator.triton_file import TritonFile

from .contract import Contract, contract_of
from .memory import Candidate

Messages = list[dict[str, str]]
MAX_ERROR_CHARS = 4000


@dataclass(frozen=True)
class Context:
    """What every prompt about one problem shares."""

    original: TritonFile
    device: str  # e.g. "NVIDIA H200 (cuda, sm_90)" or "no GPU: Triton interpreter"
    knowledge: str
    timing: bool
    focus: str | None = None  # the one kernel to optimize (None: all of them)
    diagnosis: str = ""  # why the original is slow: its calls on the roofline, its kernels' compile facts

    @cached_property
    def contract(self) -> Contract:
        return contract_of(self.original)


def system_prompt(ctx: Context) -> str:
    return (
        "You are an expert Triton GPU kernel engineer. You write correct, fast Triton kernels "
        f"for {ctx.device}.\n"
        "Rules for every module you write:\n"
        "- Keep these with the same names and signatures (a fixed unit test uses them):\n"
        f"{ctx.contract.describe()}\n"
        "- The work must be done by @triton.jit kernels launched from the wrappers: no PyTorch compute "
        "fallbacks, no try/except around launches, no side streams or threads.\n"
        "- Write ONE complete, self-contained Python module (imports, kernels, wrappers) in a single "
        "```python block. Do not include tests or benchmarks.\n"
        "- Masks on every load and store that can go out of bounds; block sizes as tl.constexpr powers of two; "
        "use only features of Triton 3.2 to 3.9 (no tl.make_block_ptr, no tensor descriptors)."
        + (
            f"\n- Optimize the kernel `{ctx.focus}` (and how its wrapper launches it); keep the other kernels as "
            "they are."
            if ctx.focus
            else ""
        )
    )


def _fence(code: str) -> str:
    return f"```python\n{code.rstrip()}\n```"


def _shared_sections(ctx: Context, one_shot: str | None) -> str:
    parts = []
    if ctx.knowledge:
        parts.append(f"## Knowledge\n{ctx.knowledge.strip()}")
    if one_shot:
        parts.append(f"## A related, well-written Triton kernel (for reference only)\n{_fence(one_shot)}")
    parts.append(
        "## The unit test (fixed: it is re-attached to your code, and your outputs are compared with the "
        f"original's on this test and on fresh random inputs)\n{_fence(ctx.original.test_section)}"
    )
    return "\n\n".join(parts)


def _rewrite_task(ctx: Context) -> str:
    goal = "faster" if ctx.timing else "correct and efficient (no GPU is visible, so speed cannot be measured)"
    return f"Rewrite this Triton code so that it stays correct and becomes {goal} on {ctx.device}."


def generate(ctx: Context, code: str, one_shot: str | None, note: str = "") -> Messages:
    """First attempt, or a fresh start: rewrite the original for speed."""
    user = (
        f"## Task\n{_rewrite_task(ctx)}\n"
        + (f"{note}\n" if note else "")
        + f"\n## Current code\n{_fence(code)}\n\n{_shared_sections(ctx, one_shot)}\n\n"
        "Reply with a short analysis of the bottleneck and your plan, then the complete module."
    )
    return [{"role": "system", "content": system_prompt(ctx)}, {"role": "user", "content": user}]


def from_instruction(ctx: Context, instruction: str, one_shot: str | None, note: str = "") -> Messages:
    """Generate mode (the paper's setting): write the module from the task's instruction alone."""
    user = (
        f"## Task\n{instruction.strip()}\n"
        + (f"{note}\n" if note else "")
        + f"\n{_shared_sections(ctx, one_shot)}\n\n"
        "Reply with a short plan, then the complete module."
    )
    return [{"role": "system", "content": system_prompt(ctx)}, {"role": "user", "content": user}]


def reflect(ctx: Context, failed: Candidate, one_shot: str | None) -> Messages:
    """Reflexion: explain the failure from its trace, then fix it."""
    ev = failed.evaluation
    error = (ev.message if ev else failed.note) or "no usable code in the reply"
    details = "\n".join(
        f"line {d['line']}: {d['message']}" for d in (ev.diagnostics if ev else [])[:6] if d.get("message")
    )
    report = f"{error}\n{details}".strip()[:MAX_ERROR_CHARS]
    stage = ev.stage if ev else "reply"
    notes = "".join(f"- {note}\n" for note in (ev.notes if ev else []))
    user = (
        f"## Your previous attempt failed at the {stage} stage\n```\n{report}\n```\n\n"
        + (f"## What the check noted\n{notes}\n" if notes else "")
        + f"## The code that failed\n{_fence(failed.code)}\n\n{_shared_sections(ctx, one_shot)}\n\n"
        "First write a section '## Reflection': the root cause of the failure, traced to the code, and what "
        "must change. Then give the complete corrected module."
    )
    return [{"role": "system", "content": system_prompt(ctx)}, {"role": "user", "content": user}]


def reflect_on_reply(
    ctx: Context, failed: Candidate, start: str | None, instruction: str | None, one_shot: str | None
) -> Messages:
    """The previous reply had no usable code (cut off, a function missing, no code block): the task again, with the
    code to start from (`start`; in generate mode, None and the `instruction`) and the strategy it was to follow."""
    why = (failed.evaluation.message if failed.evaluation else "") or failed.note or "no usable code in the reply"
    task = instruction.strip() if instruction is not None else _rewrite_task(ctx)
    strategy = f"## The strategy to implement\n{failed.strategy.strip()}\n\n" if failed.strategy else ""
    code = f"## The code to start from\n{_fence(start)}\n\n" if start is not None else ""
    user = (
        f"## Your previous reply could not be used\n{why}\n"
        "Keep the analysis short, so that the complete module fits in the reply.\n\n"
        f"## Task\n{task}\n\n{strategy}{code}{_shared_sections(ctx, one_shot)}\n\n"
        "Reply with one or two sentences on your plan, then the complete module."
    )
    return [{"role": "system", "content": system_prompt(ctx)}, {"role": "user", "content": user}]


def optimizer(ctx: Context, ancestors: list[Candidate], baseline_ms: float | None, avoid: str = "") -> Messages:
    """The LLM as optimizer: past (code, latency) pairs, slowest first, so the direction of improvement shows."""
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
    base = f"The original takes {baseline_ms:.4f} ms. " if baseline_ms else ""
    why = f"Why the original is slow, as measured: {ctx.diagnosis}\n" if ctx.diagnosis else ""
    user = (
        f"## Measured candidates on {ctx.device}, slowest first\n{base}\n{why}\n" + "\n\n".join(blocks) + "\n\n"
        f"## Knowledge\n{ctx.knowledge.strip()}\n\n"
        "## Your job\nAnalyse why the faster candidates are faster and what limits the fastest one (memory- or "
        "compute-bound? compare its efficiency with the peak). Then write a section '## Strategy': a concrete, "
        "numbered plan for the next version that should be faster still. Do not write code."
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


def implement(ctx: Context, base: Candidate, strategy: str, one_shot: str | None) -> Messages:
    """The Generator, writing code from the Optimizer's strategy."""
    user = (
        f"## Task\nImplement this optimization strategy on the code below (currently "
        f"{base.evaluation.latency_ms:.4f} ms).\n"
        if base.evaluation and base.evaluation.latency_ms
        else "## Task\nImplement this optimization strategy on the code below.\n"
    ) + (
        f"\n## Strategy\n{strategy.strip()}\n\n## Code\n{_fence(base.code)}\n\n{_shared_sections(ctx, one_shot)}\n\n"
        "Reply with one sentence on what you changed, then the complete module."
    )
    return [{"role": "system", "content": system_prompt(ctx)}, {"role": "user", "content": user}]
