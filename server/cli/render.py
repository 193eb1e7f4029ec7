"""Human-readable rendering of evaluator results for the terminal (rich)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from geak.evaluator import NOT_RUN_KINDS, BenchResult, CallTiming, CheckResult, ProfileResult

if TYPE_CHECKING:
    from ..base_comparison import BaseVerdict
    from ..base_revision import Base
    from .check_many import FileVerdict


@cache
def console() -> Console:
    return Console(highlight=False, soft_wrap=True)


@cache
def err_console() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


@contextlib.contextmanager
def status_reporter(enabled: bool = True) -> Iterator[Callable[[str], None] | None]:
    """A spinner on stderr showing the latest progress message."""
    if not enabled or not err_console().is_terminal:
        yield None
        return
    with err_console().status("starting") as status:
        yield lambda message: status.update(escape(message))


def print_check(result: CheckResult) -> None:
    out = console()
    verdict = "[green]PASS[/green]" if result.ok else "[red]FAIL[/red]"
    if result.not_checkable is not None:
        verdict = "[yellow]NOT CHECKABLE[/yellow]"
    where = ", ".join(x for x in (f"stage {result.stage}", result.backend, result.device) if x)
    out.print(f"{verdict} {escape(result.file)} ({escape(where)}, {result.duration_s:.1f} s)")
    out.print(f"  {escape(_first_lines(result.message, 3))}")
    benchmarks = [t for t in result.tests if t.kind == "benchmark"]
    for test in result.tests:
        if test.kind == "benchmark":
            continue
        if test.kind in NOT_RUN_KINDS:
            out.print(f"  [yellow]-[/yellow] {escape(test.name)}  [dim]{escape(_first_lines(test.message))}[/dim]")
            continue
        mark = "[green]✓[/green]" if test.ok else "[red]✗[/red]"
        launches = ", ".join(f"{k}×{v}" for k, v in test.launches.items())
        detail = f"  [dim]{escape(launches)}[/dim]" if launches else ""
        out.print(f"  {mark} {escape(test.name)}  {test.duration_s:.2f} s{detail}")
        if not test.ok and not result.diagnostics:
            out.print(f"      {escape(_first_lines(test.message, 3))}")
    if benchmarks:
        out.print(f"  [dim]{len(benchmarks)} benchmark case(s) not run by the check (geak bench runs them)[/dim]")
    for d in result.diagnostics:
        out.print(
            f"  [bold]{escape(d.file or result.file)}:{d.line}:{d.column}[/bold]: {d.severity}: "
            f"{escape(_first_lines(d.message))}"
        )
    for caveat in result.caveats_beyond_summary():
        out.print(f"  [yellow]note:[/yellow] {escape(caveat)}")
    for note in result.comparison.notes if result.comparison else ():
        out.print(f"  [yellow]note:[/yellow] {escape(note)}")
    if not result.ok and result.output_tail.strip():
        out.print("  [dim]output (tail):[/dim]")
        out.print(escape(result.output_tail.strip()[-1500:]), style="dim")


class FileProgress:
    """A progress bar over files on stderr (nothing when stderr is not a terminal)."""

    def __init__(self, progress: Progress | None, total: int):
        self._progress = progress
        self._task = progress.add_task("checking", total=total) if progress else None

    def update(self, file: Path, message: str) -> None:
        if self._progress is not None:
            self._progress.update(self._task, description=escape(f"{file.name}: {message}"[:70]))

    def done(self, verdict: FileVerdict) -> None:
        if self._progress is not None:
            self._progress.advance(self._task)


@contextlib.contextmanager
def file_progress(total: int, enabled: bool = True) -> Iterator[FileProgress]:
    if not enabled or not err_console().is_terminal:
        yield FileProgress(None, total)
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err_console(), transient=True) as progress:
        yield FileProgress(progress, total)


def print_check_summary(verdicts: list[FileVerdict], totals: dict[str, int], wall_s: float) -> None:
    """A row per file that did not pass (with the reason), then the counts."""
    out = console()
    problems = [v for v in verdicts if v.verdict != "pass"]
    if problems:
        table = Table(show_edge=False, pad_edge=False)
        table.add_column("file", no_wrap=True)
        table.add_column("verdict", no_wrap=True)
        table.add_column("why", overflow="fold")
        for v in problems:
            stage = f" ({v.result.stage})" if v.result else ""
            table.add_row(escape(Path(v.file).name), f"{v.verdict}{stage}", escape(_first_lines(v.message, 2)))
        out.print(table)
    counts = ", ".join(f"{n} {k}" for k, n in totals.items() if k != "files" and n)
    out.print(f"[bold]{totals['files']} files[/bold]: {counts} ({wall_s:.0f} s)")


BASE_VERDICTS = {
    "pass": "[green]PASS[/green]",
    "same": "[green]SAME[/green]",
    "fail": "[red]FAIL[/red]",
    "slower": "[red]SLOWER[/red]",
    "not checkable": "[yellow]NOT CHECKABLE[/yellow]",
    "bad input": "[red]BAD INPUT[/red]",
}


def print_base_verdicts(
    base: Base, verdicts: list[BaseVerdict], totals: dict[str, int], wall_s: float, single: bool = False
) -> None:
    """Files against their versions at `base`: one file with its check's (or timing's) details, then its verdict;
    several, a row each and the counts."""
    out = console()
    if single:
        (v,) = verdicts
        for result in (v.alone, v.result):
            if result is not None:
                print_check(result)
        if v.bench is not None:
            print_bench(v.bench)
        out.print(f"{BASE_VERDICTS[v.verdict]} {escape(v.file)} vs {escape(base.name)}: {escape(v.message)}")
        if v.note:
            out.print(f"  [yellow]note:[/yellow] {escape(v.note)}")
        return
    table = Table(show_edge=False, pad_edge=False, title=f"against {escape(base.name)}", title_justify="left")
    table.add_column("file", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    table.add_column("why", overflow="fold")
    for v in verdicts:
        why = _first_lines(v.message, 2) + (f" ({v.note})" if v.note else "")
        table.add_row(escape(_shown_path(v.file)), BASE_VERDICTS[v.verdict], escape(why))
    out.print(table)
    counts = ", ".join(f"{n} {k}" for k, n in totals.items() if k != "files" and n)
    out.print(f"[bold]{totals['files']} files[/bold]: {counts} ({wall_s:.0f} s)")


def _shown_path(file: str) -> str:
    """A path from the working directory where it is under it, else as given."""
    path = Path(file)
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return file


def print_bench(result: BenchResult) -> None:
    out = console()
    if result.check is not None and not result.check.ok:
        print_check(result.check)
    verdict = "[green]TIMED[/green]" if result.ok else "[red]NOT TIMED[/red]"
    device = f" ({escape(result.device)})" if result.device else ""
    out.print(f"{verdict} {escape(result.file)}{device}: {escape(result.message)}")
    if result.calls:
        out.print(timing_table(result.calls, "candidate" if result.reference_calls else "file"))
    if result.reference_calls:
        out.print(timing_table(result.reference_calls, "reference"))
    if result.kernel_ms:
        out.print("  device time per kernel: " + ", ".join(f"{k} {v:.4f} ms" for k, v in result.kernel_ms.items()))
    if result.speedup:
        s = result.speedup
        out.print(
            f"  speedup {s.ratio:.3f}x, 95% interval [{s.low:.3f}, {s.high:.3f}] over {s.rounds} rounds: "
            f"[bold]{s.verdict}[/bold]"
        )
    if result.peaks:
        p = result.peaks
        out.print(
            f"  [dim]peaks ({p.source}): {p.bandwidth_gbps:.0f} GB/s copy, {p.tflops_16bit:.0f} TFLOP/s "
            f"16-bit, {p.tflops_fp32:.0f} TFLOP/s fp32[/dim]"
        )


def print_profile(result: ProfileResult) -> None:
    out = console()
    verdict = "[green]PROFILED[/green]" if result.ok else "[yellow]NOT PROFILED[/yellow]"
    out.print(f"{verdict} {escape(result.file)}: {escape(result.message)}")
    if not result.kernels:
        return
    table = Table(show_edge=False, pad_edge=False)
    for column in ("kernel", "launches", "µs", "achieved occupancy", "allowed", "DRAM %", "SM %", "waves"):
        table.add_column(column, justify="left" if column == "kernel" else "right")
    for k in result.kernels:
        table.add_row(
            escape(k.kernel + (f" [{k.hash[:8]}]" if k.hash else "")),
            str(k.launches),
            _num(k.duration_us, 1),
            _pct(k.achieved_occupancy),
            _pct(k.theoretical_occupancy),
            _num(k.dram_pct, 1),
            _num(k.sm_pct, 1),
            _num(k.waves, 2),
        )
    out.print(table)


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{100 * share:.1f}%"


def timing_table(calls: tuple[CallTiming, ...], title: str) -> Table:
    table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    for column in ("call", "median ms", "±%", "GB/s", "% BW", "TFLOP/s", "% FLOP", "method"):
        table.add_column(column, justify="left" if column in ("call", "method") else "right")
    for c in calls:
        table.add_row(
            escape(c.signature),
            f"{c.median_ms:.4f}",
            f"{c.spread_pct:.1f}",
            _num(c.gbps, 0),
            _num(c.pct_peak_bw, 1),
            _num(c.tflops, 1),
            _num(c.pct_peak_flops, 1),
            f"{c.method} ({c.cache} L2)",
        )
    return table


def _num(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def one_line(text: str) -> str:
    """The first non-blank line of a message (for one-line errors)."""
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _first_lines(text: str, n: int = 6) -> str:
    lines = text.strip().splitlines()
    return "\n".join(lines[:n]) + (" …" if len(lines) > n else "")
