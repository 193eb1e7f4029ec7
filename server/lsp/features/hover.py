"""Hover on a kernel's name: per captured call its shape, time, GB/s, TFLOP/s, % of peak and what bounds it (memory,
compute or latency); what the compiler made of the kernel (registers, spills, shared memory, occupancy) and, where
the vendor's profiler ran, what it measured (achieved occupancy, DRAM and SM throughput); the last
check's verdict and when; its comparison with the base revision (what it said, and on a GPU the paired timing with
each captured call's time on both sides); the last optimize's finding, why the kernel was slow, and its best
candidates. On a module of a repository: which of the repository's tests judge it and why, and what was left out."""

from __future__ import annotations

import re
import time
from pathlib import Path

from lsprotocol import types

from geak.evaluator import cases_run, kernel_line, timing_cost, with_profile

from ...base_comparison import speed_line
from ..analysis import DocumentModel
from ..base_compare import BaseReport
from ..checks import FileReport
from ..modules import ModuleFinding
from ..positions import Positions
from ..state import ServerState
from ..timing_text import format_ms, kernel_calls

WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SHOWN_TESTS = 8  # a module's tests listed by name in the hover (the rest counted)
SOURCES = {"imports": "found through imports", "[tool.geak]": "named in [tool.geak.tests]", "--tests": "named"}


def word_at(line: str, character: int) -> tuple[str, int, int] | None:
    for m in WORD.finditer(line):
        if m.start() <= character <= m.end():
            return m.group(), m.start(), m.end()
    return None


def ago(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s ago"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min ago"
    return time.strftime("%H:%M", time.localtime(time.time() - seconds))


def kernel_markdown(state: ServerState, uri: str, model: DocumentModel, kernel: str) -> str:
    info = model.kernel(kernel)
    lines = [f"**GEAK · `{kernel}`**" + (" (autotuned)" if info and info.autotuned else "")]
    report: FileReport | None = state.checks.cache.get(model.key)
    found = state.modules.known(state.documents.path_of(uri)) if not model.has_tests else None
    if report is None:
        if model.has_tests:
            lines.append("\nNot checked yet: save the file to run its test.")
        elif found is not None and found.target is not None:
            lines.append("\nNot checked yet: save the module to run its repository's tests.")
    elif report.check is None:
        lines.append(f"\nNot checked: {report.error}")
    else:
        check = report.check
        verdict = (
            "✅ passes"
            if check.ok
            else "ℹ️ not checked here"
            if check.not_checkable
            else f"❌ fails at the {check.stage} stage"
        )
        backend = f" on {check.device or check.backend}" if check.backend else ""
        lines.append(f"\n{verdict}{backend} ({ago(time.time() - report.checked_at)}): {check.summary}")
        lines += [f"- note: {caveat}" for caveat in check.caveats_beyond_summary()]
    if report is not None and report.bench is not None:
        bench = report.bench
        calls = kernel_calls(bench, kernel)
        if calls:
            lines += ["", "| call | time | GB/s | TFLOP/s | % of peak | bound |", "|---|---|---|---|---|---|"]
            costs = [timing_cost(c, bench.peaks) for c in calls]
            for c, cost in zip(calls, costs, strict=True):
                kernel_time = c.kernel_ms.get(kernel)
                own = f" (kernel {format_ms(kernel_time)})" if kernel_time and len(c.kernel_ms) > 1 else ""
                peak = max(c.pct_peak_bw or 0, c.pct_peak_flops or 0)
                lines.append(
                    f"| `{c.signature}` | {format_ms(c.median_ms)}{own} | {_num(c.gbps)} | {_num(c.tflops)} | "
                    f"{f'{peak:.0f}%' if peak else '-'} | {cost.bound} |"
                )
            slowest = max(costs, key=lambda cost: cost.ms or 0.0)
            lines.append(f"\nWhy: `{slowest.signature}` is {slowest.why}")
            compiled = next((k for c in calls for k in c.kernels if k.kernel == kernel), None)
            if compiled is not None:
                compiled = with_profile([compiled], report.profile)[0]
            if compiled is not None and kernel_line(compiled):
                profiler = f" ({report.profile.profiler})" if compiled.measured and report.profile else ""
                lines.append(f"\nCompiled: {kernel_line(compiled)}{profiler}")
            if report.profile_note:
                lines.append(f"\nNot profiled: {report.profile_note}")
        if bench.peaks is not None:
            p = bench.peaks
            lines.append(f"\nPeaks of {p.device}: {p.bandwidth_gbps:.0f} GB/s, {p.tflops_16bit:.0f} TFLOP/s (16-bit)")
    elif report is not None and report.timing_note:
        lines.append(f"\nNot timed: {report.timing_note}")
    compared = state.compared(report)
    if compared is not None:
        lines += base_lines(compared, kernel)
    if found is not None:
        lines += module_lines(found, report, state.checks.repositories.limits.budget_s)
    record = state.optimizer.last_record(uri)
    if record is not None and record.kernel in (None, kernel):
        stale = "" if record.key == model.key else " (for an earlier version of this file)"
        lines.append(f"\n**Last optimize**{stale}: {record.summary}")
        if record.review:
            lines.append("\n**Review before applying** (the test cannot show these):")
            lines += [f"- {note}" for note in record.review]
        if record.diagnosis:
            lines.append(f"\nWhy it was slow: {record.diagnosis}")
        lines.append(record.candidates_markdown(limit=5))
    return "\n".join(lines).strip()


def module_lines(found: ModuleFinding, report: FileReport | None, budget_s: float | None) -> list[str]:
    """A module's repository tests: which were found and why, and what its last check ran and left out (cases not
    sampled or past the budget `budget_s`)."""
    if found.target is None:
        return [f"\n**Repository tests**: none ({found.problem})"]
    tests = found.target.tests
    root = tests.repository.root
    where = SOURCES.get(tests.source, tests.source)
    if tests.searched:
        where += " under " + ", ".join(_relative(p, root) for p in tests.searched)
    lines = [f"\n**Repository tests** of `{tests.module}` ({where}):"]
    lines += [f"- tests: `{t.node}` ({t.why})" for t in tests.tests[:SHOWN_TESTS]]
    if len(tests.tests) > SHOWN_TESTS:
        lines.append(f"- and {len(tests.tests) - SHOWN_TESTS} more")
    check = report.check if report is not None and report.module == found.target else None
    if check is not None and check.tests:
        lines.append(f"\nLast check: {cases_run(check.tests, budget_s)}")
    return lines


def _relative(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix() + "/" if path != root and root in path.parents else str(path)


def base_lines(compared: BaseReport, kernel: str) -> list[str]:
    """The comparison with the base: what it said, and its paired timing per captured call of `kernel`."""
    lines = [f"\n**vs {compared.rev}**: {compared.message}"]
    bench = compared.bench
    if bench is None:
        if compared.timing_note and compared.outcome == "matches":
            lines.append(f"\nNot timed against {compared.rev}: {compared.timing_note}")
        return lines
    lines.append(f"\nSpeed: {speed_line(bench, compared.rev)} ({bench.speedup.rounds} paired rounds)"
                 if bench.speedup else f"\nSpeed: {bench.message}")  # fmt: skip
    theirs = {c.signature: c for c in bench.reference_calls}
    calls = [c for c in kernel_calls(bench, kernel) if c.signature in theirs]
    if calls:
        lines += ["", f"| call | {compared.rev} | now | {compared.rev} / now |", "|---|---|---|---|"]
        for c in calls:
            base = theirs[c.signature]
            lines.append(
                f"| `{c.signature}` | {format_ms(base.median_ms)} ±{base.spread_pct / 2:.1f}% | "
                f"{format_ms(c.median_ms)} ±{c.spread_pct / 2:.1f}% | {base.median_ms / c.median_ms:.2f}× |"
            )
        lines.append("\n(medians ± half their interquartile range over the rounds; the interval is the file's)")
    return lines


def _num(value: float | None) -> str:
    return f"{value:.3g}" if value else "-"


def register(state: ServerState) -> None:
    documents = state.documents

    @state.server.feature(types.TEXT_DOCUMENT_HOVER)
    async def hover(params: types.HoverParams) -> types.Hover | None:
        uri = params.text_document.uri
        doc = documents.open_document(uri)
        if doc is None:
            return None
        text = doc.source
        model = documents.cached_model(text) or await documents.model_of(text, documents.path_of(uri))
        if not model.triton or not model.kernels:
            return None
        positions = Positions(text, state.server.workspace.position_codec)
        line = positions.to_line(params.position)
        server_pos = positions.codec.position_from_client_units(positions.lines, params.position)
        found = word_at(positions.lines[line - 1], server_pos.character)
        if found is None or model.kernel(found[0]) is None:
            return None
        name, start, end = found
        return types.Hover(
            contents=types.MarkupContent(types.MarkupKind.Markdown, kernel_markdown(state, uri, model, name)),
            range=positions.span(line, start, line, end),
        )
