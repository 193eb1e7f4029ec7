"""`geak eval PREDICTIONS.jsonl --suite tritonbench|rocm --data DIR`: score predictions made elsewhere
(TritonBench's published JSONL or GEAK's own) against the suite's golden files, with GEAK's metrics."""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from geak.agent.batch.dataloaders import BUILT_IN, SuiteError

from .ctrl_c import run_work, work_under_way
from .evaluation import whole_number
from .exits import EXIT_INTERRUPTED, CommandError
from .render import console, err_console

if TYPE_CHECKING:  # the agent (and the model client) load when the command runs, not for every `geak` command
    from geak.agent.config import AgentConfig


def register(commands) -> None:
    parser = commands.add_parser(
        "eval",
        help="score predictions (TritonBench or GEAK JSONL) against a suite's golden files",
        description="Each line's code is checked against its problem's golden file (found by file name, "
        "instruction or golden code), timed against it where a GPU is visible, and scored: call accuracy, "
        "execution accuracy, speedup, pass@k over several predictions of a problem, by difficulty.",
    )
    parser.add_argument("predictions", type=Path, help="JSONL: instruction/predict/label or filename/predict per line")
    parser.add_argument("--suite", choices=sorted(BUILT_IN), required=True)
    parser.add_argument("--data", type=Path, required=True, help="the suite folder (e.g. a GEAK-eval checkout's)")
    parser.add_argument("--output", type=Path, help="write per-prediction records (JSONL) and summary.json here")
    parser.add_argument("--resume", action="store_true",
                        help="continue an interrupted eval in --output: predictions already scored are kept")
    parser.add_argument("--backend", choices=("auto", "gpu", "interpreter"), default="auto")
    parser.add_argument("--gpu-ids", type=lambda t: [int(x) for x in t.split(",") if x.strip()], default=None)
    parser.add_argument("--workers", type=int, default=1, help="interpreter evaluators without a GPU (default 1)")
    parser.add_argument("--jobs-per-gpu", type=whole_number(1, "a whole number of at least 1"), default=None,
                        metavar="N", help="predictions checked at once on each GPU (timings run alone; default: as "
                        "many as the cores allow, two left over, 2 to 16)")
    parser.add_argument("--timeout", type=float, default=300.0, metavar="S", help="time limit of one check")
    parser.add_argument("--rounds", type=whole_number(3, "a whole number of at least 3"), default=None,
                        help="interleaved timing rounds (default: until each speedup is decided, 6 to 40)")
    parser.add_argument("--no-timing", action="store_true",
                        help="correctness only: call and execution accuracy, as GEAK-eval's first two steps")
    parser.add_argument("--tuned-reference", action="store_true",
                        help="also time each prediction against its golden file after the search without a model "
                        "(GPU): a speedup over it is what tuning the golden file's launches alone does not reach")
    parser.add_argument("--ray-address", help="evaluate on a Ray cluster ('local' starts one)")
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if not args.predictions.is_file():
        raise CommandError(f"{args.predictions}: no such file") from None
    if args.workers < 1:
        raise CommandError("--workers must be at least 1") from None
    if args.tuned_reference and args.no_timing:
        raise CommandError("--tuned-reference times predictions against the tuned golden files: not with --no-timing")
    try:
        suite = BUILT_IN[args.suite](args.data)
    except SuiteError as e:
        raise CommandError(f"{e}") from None
    try:
        earlier = _earlier_records(args)
    except ValueError as e:
        raise CommandError(f"{e}") from None
    # The agent (and the model client) load when the command runs, not for every `geak` command.
    from geak.agent.batch import metrics
    from geak.agent.batch.eval_slots import SlotError
    from geak.agent.config import AgentConfig

    from .batch_render import print_summary

    agent = AgentConfig(timeout_per_check_s=args.timeout, bench_rounds=args.rounds)
    work_under_way()
    try:
        result = run_work(_evaluate(args, suite, agent, earlier))
    except SlotError as e:
        raise CommandError(f"{e}") from None
    except ValueError as e:  # an unreadable predictions file (SuiteError)
        raise CommandError(f"{e}") from None
    except KeyboardInterrupt:
        raise CommandError("stopped", EXIT_INTERRUPTED) from None
    records, unmatched, wall = result.records, result.unmatched, result.wall_s
    summary = {**metrics.summarize(records), "predictions": len(records), "unmatched": len(unmatched)}
    summary["wall_s"] = round(wall, 1)
    if args.output:
        (args.output / "summary.json").write_text(json.dumps(summary, indent=1))
    if not records:
        examples = "".join(f"\n  {line}" for line in unmatched[:5])
        raise CommandError(f"no line of {args.predictions} matches a problem of {args.suite}{examples}")
    if args.json:
        print(json.dumps({"summary": summary, "records": records, "unmatched": unmatched}))
        return 0
    for line in unmatched[:10]:
        err_console().print(f"[yellow]skipped[/yellow] {line}")
    print_summary(summary, f"{args.suite}: {summary['problems']} problem(s) from {len(records)} prediction(s)")
    if args.tuned_reference:
        console().print(tuned_line(summary))
    console().print(
        f"[dim]{wall:.0f} s" + (f"; records: {args.output / 'records.jsonl'}" if args.output else "") + "[/dim]"
    )
    return 0


def tuned_line(summary: dict) -> str:
    """The summary's speedup over the golden files after the search without a model (`--tuned-reference`)."""
    timed = summary.get("timed_vs_tuned", 0)
    if not timed:
        return "[dim]vs the tuned golden files: no prediction was timed against one (only those timed on a GPU)[/dim]"
    return (
        f"vs the golden files after the search without a model: speedup (geomean) "
        f"{summary['speedup_vs_tuned_geomean']:.3f}x over {timed} timed, {summary.get('faster_vs_tuned', 0)} faster"
    )


def _earlier_records(args: argparse.Namespace) -> dict[int, dict]:
    """The records an interrupted eval of the same predictions left in --output (with --resume); without --resume,
    an --output that holds records is refused rather than overwritten. Marks --output with what it evaluates."""
    if args.output is None:
        if args.resume:
            raise ValueError("--resume needs --output: the folder of the eval to continue")
        return {}
    mark = args.output / "eval.json"
    this = {"predictions": hashlib.sha256(args.predictions.read_bytes()).hexdigest(), "suite": args.suite}
    if args.tuned_reference:  # its records hold other fields: not to be mixed with an eval's without
        this["tuned_reference"] = True
    from geak.agent.batch.eval import read_earlier

    earlier = read_earlier(args.output / "records.jsonl")
    if not args.resume:
        if earlier:
            raise ValueError(f"{args.output} holds {len(earlier)} record(s) of an earlier eval: continue it with "
                             "--resume, or choose another --output")  # fmt: skip
    elif mark.is_file() and json.loads(mark.read_text()) != this:
        raise ValueError(f"{args.output} holds an eval of other predictions or another suite: it cannot be resumed")
    elif not mark.is_file() and earlier:
        raise ValueError(f"{args.output} does not say which predictions its records score: it cannot be resumed")
    args.output.mkdir(parents=True, exist_ok=True)
    mark.write_text(json.dumps(this))
    return earlier


async def _evaluate(args: argparse.Namespace, suite, agent: AgentConfig, earlier: dict[int, dict]):
    from geak.agent.batch.eval import score_predictions
    from geak.agent.batch.eval_slots import EvalSlot, batch_eval_options, eval_jobs_per_gpu, local_slots, slot_gpus
    from geak.agent.batch.run_config import RunConfig
    from geak.agent.batch.tuned_reference import TunedReferences

    jobs: int | None = args.jobs_per_gpu
    if args.ray_address:
        from geak.agent.batch.ray_evaluation import ray_slots, shutdown_ray

        slots: list[EvalSlot] = ray_slots(args.ray_address, batch_eval_options(agent, "auto", None), args.workers)
    else:
        run_cfg = RunConfig.model_construct(
            backend=args.backend, gpu_ids=args.gpu_ids, workers=args.workers, jobs_per_gpu=jobs or 2
        )
        if jobs is None:
            gpus = slot_gpus(run_cfg)
            jobs = run_cfg.jobs_per_gpu = eval_jobs_per_gpu(len(gpus)) if gpus else 2
        slots = local_slots(run_cfg, agent)
    done = len(earlier)

    def on_record(record, total) -> None:
        nonlocal done
        done += 1
        if not args.json:
            verdict = "pass" if record["pass_exe"] else "call only" if record["pass_call"] else "fail"
            speed = f" {record['speedup']:.3f}x" if record.get("speedup") else ""
            if record.get("speedup_vs_tuned"):
                speed += f" ({record['speedup_vs_tuned']:.3f}x vs the tuned golden file)"
            message = (record.get("message") or "").strip()
            why = f": {message.splitlines()[0][:140]}" if message and not record["pass_exe"] else ""
            err_console().print(
                f"[{done}/{total}] {record['filename']} on {record['slot']}: {verdict}{speed}{why}", markup=False
            )

    try:
        with tempfile.TemporaryDirectory(prefix="geak-eval-refs-") as scratch:
            return await score_predictions(
                suite,
                args.predictions,
                slots,
                Path(scratch),
                rounds=args.rounds,
                timing=not args.no_timing,
                results=args.output / "records.jsonl" if args.output else None,
                on_record=on_record,
                per_slot=jobs or 2 if slots and slots[0].gpu is not None else 2,
                earlier=earlier,
                on_event=None if args.json else lambda message: err_console().print(message, style="dim", markup=False),
                tuned=TunedReferences(agent, Path(scratch) / "tuned") if args.tuned_reference else None,
            )
    finally:
        await asyncio.gather(*(slot.evaluator.aclose() for slot in slots), return_exceptions=True)
        if args.ray_address:
            shutdown_ray(args.ray_address)
