"""`geak optimize FILE`: the GEAK loop on one file, with progress, a reviewed diff, and resumable checkpoints."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape
from rich.syntax import Syntax
from rich.table import Table

from . import module_check
from .ctrl_c import run_work, work_under_way
from .evaluation import add_eval_arguments, positive_seconds, whole_number
from .exits import EXIT_INTERRUPTED, CommandError
from .render import console, err_console, one_line

if TYPE_CHECKING:  # the agent (and the model client) load when the command runs, not for every `geak` command
    from geak.agent.loop import ProgressEvent
    from geak.agent.outcome import OptimizeResult
    from geak.evaluator import ModuleTests


def register(commands) -> None:
    parser = commands.add_parser(
        "optimize",
        help="make a Triton file's kernels faster (LLM loop, or launch-parameter search without a model)",
        description="Without a model (--model or model_id in --config) GEAK tunes launch parameters by "
        "measurement. Ctrl-C stops cleanly and keeps the checkpoint; --resume continues. The file is only "
        "changed with --write. A repository's module (kernels, no test of its own) is judged by its repository's "
        "tests, every case of them for a proposal.",
    )
    parser.add_argument("file")
    parser.add_argument("--config", type=Path, help="YAML configuration (GEAK key names)")
    parser.add_argument("--model", dest="model_id", help="model name at the OpenAI-compatible endpoint")
    parser.add_argument("--base-url", help="endpoint URL (default: $OPENAI_BASE_URL or OpenAI)")
    parser.add_argument("--api-key-env", help="environment variable holding the API key (default OPENAI_API_KEY)")
    parser.add_argument(
        "--iterations", dest="max_iteration", type=whole_number(1, "a whole number of at least 1"),
        help="sequential rounds per chain",
    )  # fmt: skip
    parser.add_argument(
        "--parallel", type=whole_number(1, "a whole number of at least 1"), help="independent chains (pass@k)"
    )
    parser.add_argument(
        "--budget", dest="search_time_s", type=positive_seconds, metavar="SECONDS",
        help="seconds for the launch-configuration search (default 60)",
    )  # fmt: skip
    parser.add_argument(
        "--no-search",
        dest="search",
        action="store_false",
        default=None,
        help="skip the launch-parameter polish of the model's best candidate",
    )
    parser.add_argument("--output", dest="output_path", type=Path, help="checkpoint folder (default geak_runs)")
    parser.add_argument("--resume", action="store_true", help="continue from the checkpoint in --output")
    parser.add_argument("--write", action="store_true", help="write the best candidate into FILE")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--record", type=Path, metavar="PATH",
        help="write the run's raw record here (JSON: every configuration screened, the finalists with their bench "
        "intervals, seconds, commit, device), what benchmarks/results_table.py renders figures from",
    )  # fmt: skip
    module_check.add_arguments(parser, limits=False)  # a repository's module: its repository's tests judge it
    add_eval_arguments(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    overrides = {
        k: getattr(args, k)
        for k in (
            "model_id",
            "base_url",
            "api_key_env",
            "max_iteration",
            "parallel",
            "search_time_s",
            "search",
            "output_path",
        )
    }
    overrides |= {
        "timeout_per_check_s": args.timeout,
        "bench_rounds": args.rounds,
        "gpu_id": args.gpu,
        "seed": args.seed,
        "tolerance": args.tolerance,
        "fresh_inputs": 0 if args.no_fresh_inputs else None,
        "probe_variants": False if args.fresh_inputs_only else None,
    }
    from geak.agent.config import ConfigError, load_config
    from geak.agent.llm import LLMError
    from geak.evaluator import BadInput, WorkerStartError

    try:
        cfg = load_config(args.config, overrides)
    except ConfigError as e:
        raise CommandError(f"{e}") from None
    if args.write and not os.access(args.file, os.W_OK):
        raise CommandError(f"--write: {args.file} is not writable") from None
    if args.record is not None and (args.record.is_dir() or not os.access(_folder_of(args.record), os.W_OK)):
        raise CommandError(f"--record: cannot write a file at {args.record}") from None
    module = module_check.is_module(args.file, args.tests)
    target = module_check.target_of(args.file, args.tests, args.json) if module else None
    if target is not None and args.verbose and not args.json:
        module_check.say_found(target)
    work_under_way()
    started = time.monotonic()
    try:
        result = run_work(_optimize(args, cfg, target))
    except (BadInput, ValueError, WorkerStartError) as e:
        raise CommandError(f"{one_line(str(e))}") from None
    except LLMError as e:
        raise CommandError(f"the model cannot be used: {one_line(str(e))}") from None
    except KeyboardInterrupt:
        raise CommandError(f"stopped; {_kept(cfg, args.file)}", EXIT_INTERRUPTED) from None
    if args.record is not None:
        _write_record(args.record, cfg, result, time.monotonic() - started)
    if args.json:
        found = {"repository_tests": target.to_dict()} if target is not None else {}
        print(json.dumps({**result.to_dict(), **found}, default=str))
    else:
        print_result(result)
    if args.write and result.new_text:
        Path(args.file).write_text(result.new_text)
        console().print(f"[green]wrote[/green] {escape(args.file)}")
    return 0


def _folder_of(path: Path) -> Path:
    """The nearest existing folder of `path` (where its missing folders would be made)."""
    folder = path.resolve().parent
    while not folder.exists():
        folder = folder.parent
    return folder


def _write_record(path: Path, cfg, result: OptimizeResult, seconds: float) -> None:
    from geak.agent.search_record import file_record, run_record, write_record

    record = run_record([file_record(result, seconds)], f"geak optimize {result.file}", budget_s=cfg.search_time_s,
                        model=cfg.model_id or None)  # fmt: skip
    try:
        write_record(path, record)
    except OSError as e:
        raise CommandError(f"--record: cannot write {path}: {e.strerror}") from None


def _kept(cfg, file: str) -> str:
    from geak.agent.checkpoint import paths_for

    checkpoint = paths_for(cfg.output_path, file).latest
    if checkpoint.exists():
        return f"the checkpoint is kept at {checkpoint} (continue with --resume)"
    return "no candidate was finished, so there is no checkpoint to resume from"


async def _optimize(args: argparse.Namespace, cfg, module: ModuleTests | None) -> OptimizeResult:
    from geak.agent.session import OptimizeSession

    progress = None if args.json else _print_progress
    session = OptimizeSession(args.file, cfg, backend=args.backend, progress=progress, module=module)
    return await session.run(resume=args.resume)


def _print_progress(event: ProgressEvent) -> None:
    if event.kind == "done":
        return  # the result's message says it once, on stdout
    style = {"round": "bold", "search": "cyan", "start": "bold", "final": "cyan", "waiting": "dim"}.get(event.kind)
    best = f"  [dim](best so far {event.best_speedup:.3f}x)[/dim]" if event.best_speedup else ""
    message = escape(event.message)
    err_console().print(f"[{style}]{message}[/]{best}" if style else f"  {message}{best}")


def print_result(result: OptimizeResult) -> None:
    out = console()
    notes = [_shorten(c.note or "", NOTE_WIDTH) + (" ⚠ review below" if c.review else "") for c in result.candidates]
    timed = any(c.evaluation and (c.evaluation.latency_ms or c.evaluation.speedup) for c in result.candidates)
    table = Table(title="candidates", title_justify="left", show_edge=False)
    columns = ("id", "origin", "verdict", "ms", "speedup [95% CI]", "% BW") if timed else ("id", "origin", "verdict")
    for column in columns:
        table.add_column(column, no_wrap=True)
    longest_word = max((len(w) for note in notes for w in note.split()), default=4)
    table.add_column("note", min_width=min(longest_word, NOTE_WIDTH))  # wraps between words only
    for c, note in zip(result.candidates, notes, strict=True):
        ev = c.evaluation
        verdict = "pass" if c.passed else f"fail ({ev.stage})" if ev else "-"
        speed = f"{ev.speedup:.3f} [{ev.speedup_low:.3f}, {ev.speedup_high:.3f}]" if ev and ev.speedup else "-"
        timing = (
            f"{ev.latency_ms:.4f}" if ev and ev.latency_ms else "-",
            speed,
            f"{ev.pct_peak_bw:.0f}" if ev and ev.pct_peak_bw else "-",
        )
        table.add_row(escape(c.id), c.origin, escape(verdict), *(timing if timed else ()), escape(note))
    if result.candidates:
        out.print(table)
    if result.baseline_ms:
        out.print(f"original: {result.baseline_ms:.4f} ms on {escape(str(result.runtime.get('device')))}")
    if result.search:
        from geak.agent.tuning.launch_search import SHOWN

        shown = result.search.get("configurations") or []
        if shown:
            out.print(screened_table(shown[:SHOWN], len(shown)))
        out.print(search_line(result.search))
        if result.search.get("diagnosis"):
            out.print(f"[dim]why it was slow: {escape(result.search['diagnosis'])}[/dim]")
    for c in result.candidates:  # what the test cannot show, said of every candidate it applies to
        for note in c.review:
            out.print(f"[yellow]review {escape(c.id)}:[/yellow] {escape(note)}")
    if result.diff:
        out.print(Syntax(result.diff, "diff", theme="ansi_dark", background_color="default"))
    if result.pass_at_k:
        ks = ", ".join(f"pass@{k} {v:.2f}" for k, v in result.pass_at_k.items())
        out.print(f"{ks}; call accuracy {result.call_accuracy:.2f}, execution accuracy {result.exec_accuracy:.2f}")
    if result.usage:
        out.print(_usage_line(result.usage, result.usage_this_run))
    out.print(("[green]" if result.improved else "[yellow]") + escape(result.message) + "[/]")
    out.print(f"[dim]checkpoint: {escape(result.checkpoint)}[/dim]")
    if result.improved:
        out.print("[dim]apply it with --write[/dim]")


NOTE_WIDTH = 60


def screened_table(rows: list[dict], screened: int) -> Table:
    """The first of the `screened` configurations the launch search screened, fastest in screening first (ranking
    only: no claim)."""
    more = f" (the first {len(rows)} of {screened}: --json and --record have all)" if screened > len(rows) else ""
    table = Table(title=f"screened configurations{more}", title_justify="left", show_edge=False)
    table.add_column("change")
    table.add_column("verdict", no_wrap=True)
    table.add_column("screen", no_wrap=True)
    for row in rows:
        verdict = (
            row["status"] if row["status"] in ("ok", "same") else f"{row['status']}: {_shorten(row['message'], 40)}"
        )
        ratio = f"{1 / row['ratio']:.2f}x" if row.get("ratio") else "-"
        table.add_row(escape(row["change"]), escape(verdict.rstrip(": ")), ratio)
    return table


def search_line(search: dict) -> str:
    """The launch search's tally: knobs found, configurations screened, finalists confirmed, seconds."""
    return (
        f"launch search: {search.get('knobs', 0)} knob(s), {search.get('screened', 0)} configuration(s) screened "
        f"({search.get('correct', 0)} correct) in {search.get('rounds', 0)} round(s), "
        f"{search.get('finalists', 0)} finalist(s) checked and timed, {search.get('seconds', 0):.0f} s"
    )


def _usage_line(usage: dict[str, int], this_run: dict[str, int]) -> str:
    def requests(n: int) -> str:
        return f"{n} request{'' if n == 1 else 's'}"

    line = (
        f"tokens: {usage.get('prompt_tokens', 0)} prompt + {usage.get('completion_tokens', 0)} completion "
        f"in {requests(usage.get('requests', 0))}"
    )
    if this_run != usage:
        line += f" over the resumed runs ({requests(this_run.get('requests', 0))} in this one)"
    return line


def _shorten(text: str, width: int) -> str:
    """`text` on one line, cut at a word boundary to at most `width` characters (… marks a cut)."""
    text = " ".join(text.split())
    if len(text) <= width:
        return text
    cut = text[: width - 1]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut) + "…"
