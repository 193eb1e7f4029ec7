"""A plain GEAK-eval-style judge of TritonBench predictions (not GEAK: the yardstick `geak eval --no-timing` is
measured against; no sandbox, no probes, no timing).

    python benchmarks/plain_judge.py PREDICTIONS.jsonl --data DIR [--jobs 14] [--json]

What GEAK-eval does for each prediction: the predicted code followed by the golden file's test section, and the
golden file itself, each run in a fresh process seeded with 42 (Python, NumPy, torch, every GPU; cuDNN
deterministic), their `result_gold` saved, then compared element-wise with `torch.allclose(atol=rtol=1e-3)`
(recursively through dicts, lists and tuples). Call accuracy: the composed file ran to its end; execution accuracy:
its outputs match the golden run's. Each golden file runs once, however many predictions it has.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

from geak.agent.batch.dataloaders import BUILT_IN
from geak.evaluator.triton_file import SEPARATOR

RUN = """
import importlib.util, random, sys
import numpy as np, torch
random.seed(42); np.random.seed(42); torch.manual_seed(42); torch.cuda.manual_seed_all(42)
torch.backends.cudnn.deterministic = True; torch.backends.cudnn.benchmark = False
spec = importlib.util.spec_from_file_location("judged", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
torch.save(getattr(module, "result_gold", None), sys.argv[2])
"""


async def run_file(path: Path, out: Path, limit: asyncio.Semaphore, timeout_s: float) -> bool:
    """Run one file as GEAK-eval does; True when it ran to its end and saved its `result_gold`."""
    path, out = path.resolve(), out.resolve()  # the file runs in its own folder: a relative path would not be found
    async with limit:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", RUN, str(path), str(out), cwd=path.parent,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        try:
            async with asyncio.timeout(timeout_s):
                await proc.wait()
        except TimeoutError:
            proc.kill()
            await proc.wait()
            return False
    return proc.returncode == 0 and out.exists()


def same(ref, cand) -> bool:
    import numpy as np
    import torch

    if isinstance(ref, torch.Tensor):
        if not isinstance(cand, torch.Tensor) or ref.shape != cand.shape:
            return False
        if ref.is_complex():
            ref, cand = torch.view_as_real(ref), torch.view_as_real(cand)
        return bool(torch.allclose(ref.double(), cand.double(), atol=1e-3, rtol=1e-3, equal_nan=True))
    if isinstance(ref, dict):
        return isinstance(cand, dict) and ref.keys() == cand.keys() and all(same(ref[k], cand[k]) for k in ref)
    if isinstance(ref, (list, tuple)):
        return isinstance(cand, (list, tuple)) and len(ref) == len(cand) and all(map(same, ref, cand))
    if isinstance(ref, np.ndarray):  # compared as the tensors above
        return isinstance(cand, np.ndarray) and ref.shape == cand.shape and bool(
            np.allclose(ref, cand, atol=1e-3, rtol=1e-3, equal_nan=True))
    return bool(np.all(ref == cand))


async def judge(predictions: Path, data: Path, jobs: int, timeout_s: float, progress: Path | None = None) -> dict:
    import torch

    suite = BUILT_IN["tritonbench"](data)
    states = suite.load_ps(predictions)
    limit = asyncio.Semaphore(jobs)
    with tempfile.TemporaryDirectory(prefix="plain-judge-") as tmp:
        scratch = Path(tmp)
        goldens = {ps.path for ps in states if ps.path}
        golden_out = {path: scratch / f"golden_{i}.pt" for i, path in enumerate(sorted(goldens))}

        async def golden(path: str) -> bool:
            return await run_file(Path(path), golden_out[path], limit, timeout_s)

        async def prediction(i: int, ps) -> tuple[bool, bool]:
            test = Path(ps.path).read_text().split(SEPARATOR, 1)[1]
            composed = scratch / f"pred_{i}" / Path(ps.path).name
            composed.parent.mkdir()
            composed.write_text(f"{ps.solution or ''}\n{SEPARATOR}\n{test}")
            called = await run_file(composed, composed.with_suffix(".pt"), limit, timeout_s)
            if not called or not await golden_done[ps.path]:
                verdict = called, False
            else:
                load = lambda p: torch.load(p, weights_only=False)
                verdict = called, same(load(golden_out[ps.path]), load(composed.with_suffix(".pt")))
            if log is not None:  # a run cut short still says how far it got
                log.write(f"{time.perf_counter() - started:7.1f} {Path(ps.path).name} call={verdict[0]} "
                          f"exec={verdict[1]}\n")  # fmt: skip
                log.flush()
            return verdict

        started = time.perf_counter()
        log = progress.open("w") if progress is not None else None
        try:
            golden_done = {path: asyncio.ensure_future(golden(path)) for path in goldens}
            verdicts = await asyncio.gather(*(prediction(i, ps) for i, ps in enumerate(states) if ps.path))
            golden_ran = sum(await asyncio.gather(*golden_done.values()))
        finally:
            if log is not None:
                log.close()
        wall = time.perf_counter() - started
    return {
        "predictions": len(verdicts),
        "call_pass": sum(c for c, _ in verdicts),
        "exec_pass": sum(e for _, e in verdicts),
        "golden_files": len(goldens),
        "golden_ran": golden_ran,  # ran to their end (a golden file that fails here scores no prediction)
        "wall_s": round(wall, 1),
        "jobs": jobs,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("predictions", type=Path)
    parser.add_argument("--data", type=Path, required=True, help="the TritonBench-revised suite folder")
    parser.add_argument("--jobs", type=int, default=14, help="files run at once")
    parser.add_argument("--timeout", type=float, default=300.0, help="per file, seconds")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--progress", type=Path, help="write each prediction's verdict here, with its time")
    args = parser.parse_args()
    summary = asyncio.run(judge(args.predictions, args.data, args.jobs, args.timeout, args.progress))
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"plain judge: {summary['predictions']} predictions, call {summary['call_pass']}, exec "
              f"{summary['exec_pass']}, in {summary['wall_s']} s ({args.jobs} processes)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
