"""`geak optimize FILE`: the GEAK loop on one file, with progress, a reviewed diff, and resumable checkpoints."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from rich.syntax import Syntax
from rich.table import Table

from geak.agent.config import ConfigError, load_config
from geak.agent.llm import LLMError
from geak.agent.loop import ProgressEvent
from geak.agent.outcome import OptimizeResult
from geak.agent.session import OptimizeSession
from geak.evaluator.api import BadInput

from .render import console, err_console


def register(commands) -> None:
    parser = commands.add_parser(
        "optimize",
        help="make a Triton file's kernels faster (LLM loop, or launch-parameter search without a model)",
        description="Without a model (--model or model_id in --config) GEAK tunes launch parameters by "
        "measurement. Ctrl-C stops cleanly and keeps the checkpoint; --resume continues. The file is only "
        "changed with --write.",
    )
    parser.add_argument("file")
    parser.add_argument("--config", type=Path, help="YAML configuration (GEAK key names)")
    parser.add_argument("--model", dest="model_id", help="model name at the OpenAI-compatible endpoint")
    parser.add_argument("--base-url", help="endpoint URL (default: $OPENAI_BASE_URL or OpenAI)")
    parser.add_argument("--api-key-env", help="environment variable holding the API key (default OPENAI_API_KEY)")
    parser.add_argument("--iterations", dest="max_iteration", type=int, help="sequential rounds per chain")
    parser.add_argument("--parallel", type=int, help="independent chains (pass@k)")
    parser.add_argument("--budget", dest="search_budget", type=int, help="launch-parameter search evaluations")
    parser.add_argument(
        "--no-search",
        dest="search",
        action="store_false",
        default=None,
        help="skip the launch-parameter polish of the model's best candidate",
    )
    parser.add_argument("--output", dest="output_path", type=Path, help="checkpoint folder (default geak_runs)")
    parser.add_argument("--resume", action="store_true", help="continue from the checkpoint in --output")
    parser.add_argument("--backend", choices=("auto", "gpu", "interpreter"), default="auto")
    parser.add_argument("--write", action="store_true", help="write the best candidate into FILE")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
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
            "search_budget",
            "search",
            "output_path",
        )
    }
    try:
        cfg = load_config(args.config, overrides)
    except ConfigError as e:
        print(f"geak optimize: {e}", file=sys.stderr)
        return 2
    if not Path(args.file).is_file():
        print(f"geak optimize: {args.file}: no such file", file=sys.stderr)
        return 2
    checkpoint = Path(cfg.output_path) / f"{Path(args.file).stem}_mem.json"
    try:
        result = asyncio.run(_optimize(args, cfg))
    except (BadInput, ValueError) as e:
        print(f"geak optimize: {e}", file=sys.stderr)
        return 2
    except LLMError as e:
        print(f"geak optimize: the model cannot be used: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            f"geak optimize: stopped; the checkpoint is kept at {checkpoint} (continue with --resume)", file=sys.stderr
        )
        return 130
    if args.json:
        print(json.dumps(result.to_dict(), default=str))
    else:
        print_result(result)
    if args.write and result.new_text:
        Path(args.file).write_text(result.new_text)
        console().print(f"[green]wrote[/green] {args.file}")
    return 0


async def _optimize(args: argparse.Namespace, cfg) -> OptimizeResult:
    if not cfg.model_configured and not args.json:
        err_console().print("[dim]no model configured (--model): tuning launch parameters by measurement[/dim]")
    session = OptimizeSession(args.file, cfg, backend=args.backend, progress=None if args.json else _print_progress)
    return await session.run(resume=args.resume)


def _print_progress(event: ProgressEvent) -> None:
    style = {"candidate": "", "round": "bold", "search": "cyan", "start": "bold", "final": "cyan", "done": "green"}
    best = f"  [dim](best so far {event.best_speedup:.3f}x)[/dim]" if event.best_speedup else ""
    err_console().print(
        f"[{style.get(event.kind, '')}]{event.message}[/]{best}"
        if style.get(event.kind)
        else f"  {event.message}{best}"
    )


def print_result(result: OptimizeResult) -> None:
    out = console()
    table = Table(title="candidates", title_justify="left", show_edge=False)
    for column in ("id", "origin", "verdict", "ms", "speedup [95% CI]", "% BW"):
        table.add_column(column, no_wrap=True)
    table.add_column("note", overflow="fold")
    for c in result.candidates:
        ev = c.evaluation
        verdict = "pass" if c.passed else f"fail ({ev.stage})" if ev else "-"
        speed = f"{ev.speedup:.3f} [{ev.speedup_low:.3f}, {ev.speedup_high:.3f}]" if ev and ev.speedup else "-"
        table.add_row(
            c.id,
            c.origin,
            verdict,
            f"{ev.latency_ms:.4f}" if ev and ev.latency_ms else "-",
            speed,
            f"{ev.pct_peak_bw:.0f}" if ev and ev.pct_peak_bw else "-",
            (c.note or "")[:60],
        )
    if result.candidates:
        out.print(table)
    if result.baseline_ms:
        out.print(f"original: {result.baseline_ms:.4f} ms on {result.runtime.get('device')}")
    if result.diff:
        out.print(Syntax(result.diff, "diff", theme="ansi_dark", background_color="default"))
    if result.pass_at_k:
        ks = ", ".join(f"pass@{k} {v:.2f}" for k, v in result.pass_at_k.items())
        out.print(f"{ks}; call accuracy {result.call_accuracy:.2f}, execution accuracy {result.exec_accuracy:.2f}")
    if result.usage:
        out.print(
            f"tokens: {result.usage.get('prompt_tokens', 0)} prompt + "
            f"{result.usage.get('completion_tokens', 0)} completion in {result.usage.get('requests', 0)} requests"
        )
    out.print(("[green]" if result.improved else "[yellow]") + result.message + "[/]")
    out.print(f"[dim]checkpoint: {result.checkpoint}[/dim]")
    if result.improved:
        out.print("[dim]apply it with --write[/dim]")
