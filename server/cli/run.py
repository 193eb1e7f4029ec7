"""`geak run CONFIG.yaml`: the GEAK loop over a benchmark suite (or a user's dataloader), on every local GPU or a
Ray cluster, resumable, with progress bars, a results JSONL, a summary and the scaling plot."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .ctrl_c import run_work, work_under_way
from .exits import EXIT_INTERRUPTED, CommandError
from .render import console


def register(commands) -> None:
    parser = commands.add_parser(
        "run",
        help="run GEAK over a benchmark suite or your own dataloader (batch, every GPU, Ray)",
        description="Runs the GEAK loop on each selected problem of the configured suite. Results are appended to "
        "OUTPUT/results.jsonl as problems finish; Ctrl-C stops, and --resume continues without losing any "
        "finished problem.",
    )
    parser.add_argument("config", type=Path, help="YAML configuration (GEAK key names; see docs/batch.md)")
    parser.add_argument("--resume", action="store_true", help="continue the run in output_path")
    parser.add_argument("--output", dest="output_path", type=Path, help="output folder (overrides output_path)")
    parser.add_argument("--start-idx", dest="start_idx", type=int, help="first problem (overrides start_idx)")
    parser.add_argument("--datalen", type=int, help="number of problems (overrides datalen)")
    parser.add_argument("--model", dest="model_id", help="model name (overrides model_id)")
    parser.add_argument("--gpu-ids", type=_ids, help="comma-separated GPU ids (overrides gpu_ids)")
    parser.add_argument("--workers", type=int, help="interpreter evaluators without a GPU (overrides workers)")
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    parser.set_defaults(run=run)


def _ids(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, not {text!r}") from None


def run(args: argparse.Namespace) -> int:
    # The agent (and the model client) load when the command runs, not for every `geak` command.
    from geak.agent.batch.dataloaders import BUILT_IN, DataloaderError, SuiteError, load_dataloader
    from geak.agent.batch.eval_slots import SlotError
    from geak.agent.batch.run import BatchError, BatchRun
    from geak.agent.batch.run_config import load_run_config
    from geak.agent.config import ConfigError
    from geak.agent.llm import LLMError

    from .batch_render import BatchProgress, print_summary

    overrides = {k: getattr(args, k) for k in ("output_path", "start_idx", "datalen", "model_id", "workers")}
    overrides["gpu_ids"] = args.gpu_ids
    try:
        run_cfg, agent_cfg = load_run_config(args.config, overrides)
        if run_cfg.suite is not None:
            loader = BUILT_IN[run_cfg.suite](**run_cfg.loader_kwargs())
        else:
            loader = load_dataloader(run_cfg.dataloader or "", run_cfg.dataloader_args)
    except (ConfigError, SuiteError, DataloaderError) as e:
        raise CommandError(f"{e}") from None
    batch_progress = BatchProgress(enabled=not args.json, verbose=bool(args.verbose))
    batch = BatchRun(run_cfg, agent_cfg, loader, resume=args.resume, progress=batch_progress)
    work_under_way()
    try:
        with batch_progress:
            outcome = run_work(batch.execute())
    except (BatchError, SlotError) as e:
        raise CommandError(f"{e}") from None
    except LLMError as e:
        raise CommandError(f"the model cannot be used: {e}") from None
    except KeyboardInterrupt:
        kept = Path(agent_cfg.output_path) / "results.jsonl"
        message = f"stopped; finished problems are in {kept} (continue with --resume)"
        raise CommandError(message, EXIT_INTERRUPTED) from None
    if args.json:
        print(json.dumps({"output": str(outcome.output), "summary": outcome.summary, "curves": outcome.curves}))
        return 0
    print_summary(outcome.summary, f"{run_cfg.suite or run_cfg.dataloader}: {outcome.problems} problem(s)")
    out = console()
    rate = f", {outcome.problems_per_hour:.1f} problems/hour" if outcome.problems_per_hour else ""
    out.print(f"ran {outcome.ran} problem(s) in {outcome.wall_s:.0f} s{rate} on {len(outcome.slots)} evaluator(s)")
    out.print(
        f"[dim]results: {outcome.output / 'results.jsonl'}; summary: {outcome.output / 'summary.json'}"
        + (f"; plot: {outcome.plot}" if outcome.plot else "")
        + "[/dim]"
    )
    return 0
