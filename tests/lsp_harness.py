"""The GEAK language server as the tests start it: the real server (`python -m geak.server`), and with
`--scripted-gpu` the one thing CI cannot have replaced: GPU timing. With `--cli`, the `geak` command instead
(`--cli optimize FILE --json`), its GPU timing scripted the same way.

CI has no GPU, so checks (and the screening of launch configurations) run for real in Triton's interpreter, while
`Evaluator.bench`, `Evaluator.profile` (a fixed measurement of each kernel), the screening's timings and the
reported runtime are scripted: a file's latency is read from a
`# latency: X` marker in its code (1.0 ms without one), or from a `# latency: X if `TEXT`` marker where TEXT is in
the code outside such markers (a launch configuration the search writes: `'SPLIT_K': 2`), a speedup is the
reference's latency over the candidate's (±2%). Everything else — LSP, scheduling, caching, the agent loop, the
model client — is the product's code.
"""

from __future__ import annotations

import atexit
import os
import re
import sys
from dataclasses import replace
from pathlib import Path

from geak.evaluator.api import Evaluator
from geak.evaluator.results import (
    BenchResult,
    CallTiming,
    CompiledKernelFacts,
    KernelProfile,
    Peaks,
    ProfileResult,
    Speedup,
)
from geak.evaluator.triton_file import parse_triton_file
from geak.server.cli import entry as cli_entry
from geak.server.cli import serve as cli_serve

DEVICE = "scripted GPU"
TEARDOWN_MARK = "GEAK_TEST_TEARDOWN_MARK"  # a file the interpreter's teardown (its `atexit` handlers) creates
PEAK_GBPS = 4000.0
BYTES = 3 * 4 * 98432  # what add(x, y) moves in the fixtures' test


def latency_of(text: str) -> float:
    code = "\n".join(line for line in text.splitlines() if "# latency:" not in line)
    for latency, needle in re.findall(r"# latency: ([0-9.]+) if `([^`]+)`", text):
        if needle in code:
            return float(latency)
    match = re.search(r"# latency: ([0-9.]+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else 1.0


def scripted_calls(owner, ms: float) -> tuple[CallTiming, ...]:
    """The captured call of a file's first wrapper, taking `ms` (its kernels 90% of it)."""
    gbps = BYTES / (ms * 1e-3) / 1e9
    kernels = {k.name: ms * 0.9 for k in owner.kernels}
    return tuple(
        CallTiming(
            wrapper=w,
            signature=f"{w}(x: float32[98432], y: float32[98432])",
            median_ms=ms,
            spread_pct=1.0,
            method="scripted",
            bytes_moved=BYTES,
            gbps=gbps,
            tflops=None,
            pct_peak_bw=100 * gbps / PEAK_GBPS,
            pct_peak_flops=None,
            cache="cold",
            kernel_ms=kernels,
            kernels=tuple(CompiledKernelFacts(k, 32, 0, 0, 4, 3, 1.0, "warps") for k in kernels),
        )
        for w in owner.wrappers[:1]
    )


def install_scripted_gpu() -> None:
    real_runtime = Evaluator.runtime

    async def runtime(self):
        info = await real_runtime(self)
        return {**info, "backend": "cuda", "device": DEVICE, "arch": "sm_90"}

    async def bench(
        self, file=None, *, source=None, against=None, progress=None, check_first=True, rounds=None, module=None
    ):
        label = str(file) if file is not None else "<candidate>"
        text = source if source is not None else Path(file).read_text()
        if check_first:
            checked = {"source": source, "against": against}
            check = await (self.check(file, **checked) if module is None else self.check_module(module, **checked))
            if not check.ok:
                return BenchResult(False, check.stage, check.backend, label, f"not timed: {check.message}", check=check)
        owner = parse_triton_file(text, label, require_tests=False)
        ms = latency_of(text)
        kernels = {k.name: ms * 0.9 for k in owner.kernels}
        calls = scripted_calls(owner, ms)
        speedup, reference_calls = None, ()
        if against is not None:
            reference_text = Path(against).read_text()
            reference_ms = latency_of(reference_text)
            reference = parse_triton_file(reference_text, str(against), require_tests=False)
            reference_calls = scripted_calls(reference, reference_ms)
            ratio = reference_ms / ms
            low, high = ratio * 0.98, ratio * 1.02
            verdict = "faster" if low > 1.02 else "slower" if high < 0.98 else "within noise (±2%)"
            speedup = Speedup(ratio, low, high, rounds or 15, verdict != "within noise (±2%)", verdict, 0.02)
        return BenchResult(
            ok=True,
            stage="perf",
            backend="cuda",
            file=label,
            message=f"timed (scripted): {ms} ms",
            calls=calls,
            reference_calls=reference_calls,
            kernel_ms=kernels,
            speedup=speedup,
            peaks=Peaks(DEVICE, PEAK_GBPS, 700.0, 50.0, "scripted"),
            device=DEVICE,
        )

    async def profile(self, file=None, *, source=None, progress=None):
        text = source if source is not None else Path(file).read_text()
        owner = parse_triton_file(text, str(file), require_tests=False)
        kernels = tuple(KernelProfile(k.name, "", 1, 0.818, 1.0, 84.6, 5.8, 44.4, 7.76) for k in owner.kernels)
        return ProfileResult(True, str(file), "scripted profiler: 1 launch", "scripted profiler", kernels)

    real_screen = Evaluator.screen

    async def screen(self, against, variants, *, baseline=None, **kwargs):
        result = await real_screen(self, against, variants, baseline=baseline, **kwargs)
        timed = tuple(
            replace(v, screen_ms=latency_of(text) if v.status == "ok" else None)
            for v, text in zip(result.variants, variants, strict=True)
        )
        reference = latency_of(baseline if baseline is not None else Path(against).read_text())
        return replace(result, timed=True, reference_ms=reference, variants=timed)

    Evaluator.runtime = runtime
    Evaluator.bench = bench
    Evaluator.profile = profile
    Evaluator.screen = screen


if __name__ == "__main__":
    if mark := os.environ.get(TEARDOWN_MARK):
        atexit.register(Path(mark).touch)
    args = sys.argv[1:]
    if "--scripted-gpu" in args:
        args.remove("--scripted-gpu")
        install_scripted_gpu()
    if "--cli" in args:
        args.remove("--cli")
        sys.exit(cli_entry.main(args))
    sys.exit(cli_serve.main(args))
