"""Terminal output of `geak run` and `geak eval`: progress bars (problems, and candidates of each problem in
flight) with a log of what happened where, and the metrics table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .render import console, err_console

if TYPE_CHECKING:  # `geak eval` renders with it and runs no agent: the agent's model client stays unloaded
    from geak.agent.batch.run import BatchEvent


class BatchProgress:
    """Renders `BatchEvent`s: a bar for problems, one per problem in flight for its candidates, and log lines
    (evaluator devices, where each problem ran, each verdict). Plain lines when stderr is not a terminal."""

    def __init__(self, enabled: bool = True, verbose: bool = False):
        self.enabled = enabled
        self.verbose = verbose
        self.live = enabled and err_console().is_terminal
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err_console(),
            transient=True,
        )
        self.problems = None
        self.bars: dict[str, Any] = {}

    def __enter__(self) -> BatchProgress:
        if self.live:
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live:
            self.progress.stop()

    def log(self, message: str) -> None:
        if self.enabled:
            err_console().print(escape(message)) if not self.live else self.progress.console.print(escape(message))

    def __call__(self, event: BatchEvent) -> None:
        if not self.enabled:
            return
        if event.kind in ("slot", "start", "note"):
            self.log(event.message)
            if event.kind == "start":
                self.problems = self.progress.add_task("problems", total=event.budget, completed=event.done)
        elif event.kind == "problem_start":
            self.log(event.message)
            if self.live and event.problem:
                self.bars[event.problem] = self.progress.add_task(f"  {event.problem}", total=event.budget or None)
        elif event.kind == "candidate":
            bar = self.bars.get(event.problem or "")
            if bar is not None:
                total = max(event.budget, event.done)
                self.progress.update(bar, completed=event.done, total=total or None)
            if self.verbose:
                self.log(f"  {event.problem}: {event.message}")
        elif event.kind == "problem_done":
            self.log(event.message)
            bar = self.bars.pop(event.problem or "", None)
            if bar is not None:
                self.progress.remove_task(bar)
            if self.problems is not None:
                self.progress.advance(self.problems)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _speed(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}x"


def print_summary(summary: dict[str, Any], title: str) -> None:
    """Totals and per-difficulty rows: problems, call and execution accuracy, speedup geomean, pass@k."""
    table = Table(title=title, title_justify="left", show_edge=False)
    for column in ("difficulty", "problems", "call acc", "exec acc", "speedup (geomean)", "timed", "faster"):
        table.add_column(column, justify="right" if column != "difficulty" else "left")
    rows = [(level, data) for level, data in summary.get("by_difficulty", {}).items()] + [("all", summary)]
    for level, data in rows:
        table.add_row(
            level,
            str(data["problems"]),
            _pct(data["call_accuracy"]),
            _pct(data["exec_accuracy"]),
            _speed(data["speedup_geomean"]),
            str(data["timed"]),
            str(data["faster"]),
        )
    out = console()
    out.print(table)
    if summary.get("pass_at_k"):
        out.print(", ".join(f"pass@{k} {_pct(v)}" for k, v in summary["pass_at_k"].items()))
    if summary.get("reference_errors"):
        out.print(
            f"[yellow]{summary['reference_errors']} problem(s) could not be scored: their golden file fails here "
            "(counted as failures)[/yellow]"
        )
