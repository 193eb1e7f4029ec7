"""The caller's rules for believing a timing: pure functions over the bench job's per-call data (no GPU needed).

A timing is rejected when its calls
* launched fewer Triton kernels than the same call untimed, or none where the reference launched some;
* returned outputs, after many timed calls and on fresh values at the timed addresses, that differ from the
  reference's on the same inputs (outputs cached by address or content, or left unwritten);
* ran faster than physics allows: bytes the call certainly moved over the measured bandwidth (DRAM for flushed
  timings, the L2 ceiling for graph replays, whose data may sit in L2), FLOPs over the measured matmul peak where
  the file declares them (`flops_<wrapper>`);
* claim more device time in all than the evaluator's own clock saw pass over the whole timed batch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from .compare import Tolerance, UnreadableOutput, compare, load_output, output_size, side_by_side
from .results import Peaks
from .shared.protocol import REPRODUCED, timed_output_file, timed_output_sets

IMPOSSIBLE_MARGIN = 1.15  # achieved DRAM bandwidth this far above the measured copy peak cannot be real
HOT_MARGIN = 1.5  # graph replays (data may be in L2): this far above the L2 copy ceiling
L2_FLOOR_FACTOR = 4.0  # the L2 ceiling is taken as at least this many times the DRAM bandwidth (a sound bound
# on H100/H200/MI300: their L2 reads at 2-3x DRAM), since a measured L2 copy rate can fall short of the true one
FLOPS_MARGIN = 1.5  # declared FLOPs this far above the measured 16-bit matmul rate (twice that for 8-bit inputs)
WALL_SLACK = 1.05
WALL_GRACE_MS = 100.0  # event delivery and clock granularity
REMEASURE_ABOVE = 10.0  # a speedup above this is measured again with fresh inputs before it is reported
CROSSOVER_WITHIN = 1.25  # a claimed speedup within this factor of 1 is timed again, the candidate prepared first


def impossible_speed(who: str, entry: Mapping[str, Any], median_ms: float, peaks: Peaks) -> str | None:
    """Why the call's time is physically impossible, or None."""
    for ms in (median_ms, *entry.get("samples", ())):
        if not (math.isfinite(ms) and ms > 0):  # one sample of none or negative time: a forged or broken report
            return f"{who}: {entry['signature']} was timed at {ms:g} ms: the timing was fooled"
    seconds = median_ms * 1e-3
    certain = entry.get("certain_bytes", entry.get("bytes")) or 0
    graph = entry.get("method") == "cuda-graph"
    if graph:
        ceiling = max(peaks.l2_gbps, L2_FLOOR_FACTOR * peaks.bandwidth_gbps)
        limit, what = HOT_MARGIN * ceiling, "the L2 ceiling of"
    else:
        ceiling = peaks.bandwidth_gbps
        limit, what = IMPOSSIBLE_MARGIN * ceiling, "the measured copy peak of"
    gbps = certain / seconds / 1e9
    if certain and ceiling and gbps > limit:
        return (
            f"{who}: {entry['signature']} moved at least {gbps:.0f} GB/s ({entry.get('method')} timing), above "
            f"{limit / ceiling:.2f}x {what} {ceiling:.0f} GB/s: physically impossible, so the timing was fooled "
            "(cached or unwritten outputs, work outside the timed region?)"
        )
    flops = entry.get("flops") or 0
    if flops and peaks.tflops_16bit:
        ceiling = peaks.tflops_16bit * (2.0 if entry.get("low_precision") else 1.0)
        tflops = flops / seconds / 1e12
        if tflops > FLOPS_MARGIN * ceiling:
            return (
                f"{who}: {entry['signature']} computed {tflops:.0f} TFLOP/s (its declared FLOPs over its time), above "
                f"{FLOPS_MARGIN:g}x the device's measured matmul peak of {ceiling:.0f} TFLOP/s: physically "
                "impossible, so the timing was fooled"
            )
    return None


def launch_problem(who: str, entry: Mapping[str, Any], reference: Mapping[str, Any] | None) -> str | None:
    """Why the timed calls did not launch the kernels the untimed call launched, or None."""
    timed: dict[str, float] = entry.get("timed_launches") or {}
    checked: dict[str, int] = entry.get("checked_launches") or {}
    ref_checked = sum((reference or {}).get("checked_launches", {}).values())
    if ref_checked and not sum(timed.values()):
        return (
            f"{who}: {entry['signature']} launched no Triton kernel in its timed calls, where the reference "
            f"launches {ref_checked}: the timed calls did not do the work (cached outputs, or a PyTorch fallback?)"
        )
    fewer = {name: (timed.get(name, 0.0), count) for name, count in checked.items() if timed.get(name, 0.0) < count}
    if fewer:
        detail = ", ".join(f"{name} {got:.3g} per timed call vs {want} untimed" for name, (got, want) in fewer.items())
        return (
            f"{who}: {entry['signature']} launched fewer kernels in its timed calls than untimed ({detail}): "
            "the timed calls skipped work"
        )
    return None


def output_problems(
    signature: str,
    call: int,
    input_sets: int,
    directory: Path,
    after_calls: int,
    tolerances: dict[str, Tolerance] | None = None,
    output_bytes: int = 0,
) -> tuple[list[str], list[str]]:
    """(problems, notes): the candidate's outputs of late timed calls against the reference's on identical inputs,
    per checked input set, read from the files the trusted side names itself (``protocol``). The reference's second
    run may say it reproduced the first exactly (``REPRODUCED``) instead of repeating it."""
    sets = timed_output_sets(input_sets, output_bytes)

    def paths(k: int) -> tuple[Path, Path, Path]:
        names = (("reference", ""), ("reference", "again"), ("candidate", ""))
        return tuple(directory / timed_output_file(who, call, k, run) for who, run in names)

    def judge(k: int) -> tuple[str | None, str | None]:
        where = f"timed call {signature} (input set {k + 1}, after {after_calls} timed calls)"
        return _judge_timed_set(where, paths(k), tolerances)

    largest = max(sum(output_size(p) for p in paths(k)) for k in sets)
    with ThreadPoolExecutor(side_by_side(largest)) as pool:  # the sets side by side, each holding three outputs
        judged = list(pool.map(judge, sets))
    return [p for p, _ in judged if p], [n for _, n in judged if n]


def _judge_timed_set(
    where: str, paths: tuple[Path, Path, Path], tolerances: dict[str, Tolerance] | None
) -> tuple[str | None, str | None]:
    """(problem, note) of one checked input set: its outputs (the reference's, its second run's, the candidate's)
    read side by side, then weighed."""
    with ThreadPoolExecutor(len(paths)) as reads:
        ref, again, cand = reads.map(_read, paths)
    for who, unread in (("reference", ref), ("reference", again), ("candidate", cand)):
        if isinstance(unread, UnreadableOutput):  # missing, a link, or hostile content: the timing is not believed
            return f"{who}: {where}: its outputs could not be read back ({unread})", None
    if again != REPRODUCED and compare(ref, again, where, tolerances):
        return None, f"{where}: not compared, the reference gives different outputs on the same inputs"
    mismatches = compare(ref, cand, where, tolerances)
    if not mismatches:
        return None, None
    return (
        f"candidate: the outputs of {where} differ from the reference's on the same inputs "
        f"({mismatches[0].message}): the timed calls did not compute the result (outputs cached by "
        "address or left unwritten?), or its result depends on the order its programs run (a race: the "
        "reference's two runs on these inputs agreed)"
    ), None


def _read(path: Path) -> Any:
    """A saved output, or why it cannot be read."""
    try:
        return load_output(path)
    except UnreadableOutput as e:
        return e


def wall_clock_problem(device_ms: Mapping[str, float], window_s: float | None) -> str | None:
    """Why the claimed device time cannot fit in the batch's wall time (by the caller's clock), or None."""
    claimed = sum(device_ms.values())
    if window_s is None:
        return "the timed batch was not reported as started and finished: the timing cannot be verified"
    wall_ms = window_s * 1e3
    if claimed > WALL_SLACK * wall_ms + WALL_GRACE_MS:
        return (
            f"the timed calls claim {claimed:.0f} ms of device time, but the whole timed batch took {wall_ms:.0f} ms "
            "by the evaluator's own clock: the timing was tampered with"
        )
    return None


class BatchClock:
    """The caller's clock over the job's timed batch, from the receipt times of its progress events.

    The window runs from the last "start" to the first "end" after it: events a candidate forges can only
    shorten the window (a stricter check) or leave it unclosed (a rejected timing)."""

    def __init__(self, clock=None):
        import time

        self._now = clock or time.perf_counter
        self.start: float | None = None
        self.end: float | None = None

    def on_event(self, event: Mapping[str, Any]) -> None:
        mark = event.get("batch")
        if mark == "start":
            self.start, self.end = self._now(), None
        elif mark == "end" and self.start is not None and self.end is None:
            self.end = self._now()

    @property
    def window_s(self) -> float | None:
        return None if self.start is None or self.end is None else self.end - self.start
