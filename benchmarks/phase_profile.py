"""Where a check's and a bench's time goes on this machine (not a test): every progress message with its time.

    python benchmarks/phase_profile.py [--eval] [FILE ...]   (names of TritonBench-revised files, or paths)

`--eval`: each FILE timed against itself as `geak eval` times a prediction that passed (a batch run's evaluator
settings, no check first, rounds until decided), every progress message with its time, and nothing else.

Otherwise: first five checks of `snippets/kernels/vector_add.py` as a user's file, each save with new content (the
editor's save-to-diagnostics path), then for each FILE: `geak check` alone, against itself, a 5-round bench against
itself, and `geak bench FILE --against FILE` as the command line runs it (check first, default rounds).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from geak.evaluator.api import EvalOptions, Evaluator

ROOT = Path(__file__).resolve().parent.parent
TB = ROOT / "shared/suites/tritonbench_revised/TritonBench_G_v1"
if not TB.is_dir():
    TB = ROOT.parent / "shared/suites/tritonbench_revised/TritonBench_G_v1"


def clock(tag: str) -> tuple[Callable[[str], None], float]:
    started = time.perf_counter()

    def say(message: str) -> None:
        print(f"  [{tag} {time.perf_counter() - started:7.2f} s] {message}", flush=True)

    return say, started


async def profile(files: list[str]) -> None:
    async with Evaluator(EvalOptions()) as ev:
        t = time.perf_counter()
        print("runtime", await ev.runtime(), f"{time.perf_counter() - t:.2f} s", flush=True)
        t = time.perf_counter()
        peaks = await ev.device_peaks()
        print("peaks", peaks.source, f"{time.perf_counter() - t:.2f} s", flush=True)
        text = (ROOT / "snippets/kernels/vector_add.py").read_text()
        with tempfile.TemporaryDirectory() as tmp:
            user = Path(tmp) / "vector_add.py"
            for i in range(5):
                user.write_text(text + f"\n# save {i}\n")
                say, started = clock(f"save {i}")
                r = await ev.check(user, progress=say)
                print(f"save {i}: ok={r.ok} {time.perf_counter() - started:.2f} s {r.message[:100]}", flush=True)
        for name in files:
            f = TB / name if (TB / name).exists() else Path(name)
            for what in ("check", "against itself", "bench x5", "bench default"):
                say, started = clock(f"{f.name} {what}")
                if what == "check":
                    r = await ev.check(f, progress=say)
                elif what == "against itself":
                    r = await ev.check(f, against=f, progress=say)
                elif what == "bench x5":
                    r = await ev.bench(source=f.read_text(), against=f, check_first=False, rounds=5, progress=say)
                else:
                    r = await ev.bench(f, against=f, progress=say)
                print(f"{f.name} {what}: ok={r.ok} {time.perf_counter() - started:.2f} s {r.message[:160]}")


async def eval_timings(files: list[str]) -> None:
    from geak.agent.batch.eval_slots import batch_eval_options
    from geak.agent.config import AgentConfig

    async with Evaluator(batch_eval_options(AgentConfig(), "auto", None)) as ev:
        t = time.perf_counter()
        await ev.device_peaks()
        print(f"peaks {time.perf_counter() - t:.2f} s", flush=True)
        for name in files:
            f = TB / name if (TB / name).exists() else Path(name)
            say, started = clock(f"{f.name} eval timing")
            r = await ev.bench(source=f.read_text(), against=f, check_first=False, progress=say)
            took = time.perf_counter() - started
            alone = f"the device alone {r.alone_s:.2f} s"
            print(f"{f.name} eval timing: ok={r.ok} {took:.2f} s, {alone}: {r.message[:160]}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", default=["swiglu_fwd.py", "layer_norm_liger.py", "rope_embedding.py"])
    parser.add_argument("--eval", action="store_true", help="time each file against itself as geak eval does")
    args = parser.parse_args()
    asyncio.run(eval_timings(args.files) if args.eval else profile(args.files))


if __name__ == "__main__":
    main()
