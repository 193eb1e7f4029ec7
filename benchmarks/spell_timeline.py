"""The timeline of a batch's timings from `geak -vv`'s log (not a test): each spell a GPU was alone for a timing, how
many other timings waited when it ended, and the gaps between spells, when none was ready to measure.

    geak -vv eval PREDICTIONS --suite tritonbench --data DIR 2> eval.log
    python benchmarks/spell_timeline.py eval.log [--json]

Gaps under ``LONG_GAP_S`` are the next timing's preparation; longer ones are waits of another kind (for a check
still running, or for a device a paused check's kernel keeps busy), listed apart. The checks paused longest are
listed too, the last to end first: a check paused through every spell can end the whole batch. So are the stalls: a
timing found the device busy with a paused job's kernel, and no one had it alone until the jobs then sharing it had
ended; each is given with the last check to end before the device was alone again. The timings to end last are
listed with their own time, pauses left out: a timing whose preparation is long, started last, is the batch's tail.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import statistics
import sys
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

LINE = r"(\d+) ms DEBUG geak\.evaluator\.device_share: (.+): "  # the CLI's LOG_FORMAT, then the device's name
ALONE = re.compile(LINE + r"alone for a job \((\d+) paused")
SHARED = re.compile(LINE + r"shared again after [\d.]+ s alone \((\d+) waiting")
ENDED = re.compile(
    r"(\d+) ms INFO geak\.evaluator\.pool: a (\w+) job (?:of (.+?) )?(ended in|was killed at its time limit after|"
    r"was ended as hung after) "
    r"([\d.]+) s(?: \(([\d.]+) s of it paused\))?"
)
ENDS = {  # how a job ended, as its end line says it (``ENDED``'s fourth group), in the words listed here
    "ended in": "ended",
    "was killed at its time limit after": "killed at its limit",
    "was ended as hung after": "ended as hung",
}
STALLED = re.compile(LINE + r"(\d+) job\(s\) in the way of a timing")
LONG_GAP_S = 5.0  # a gap this long is not a timing's preparation
LISTED_CHECKS = 3  # how many of the checks paused that long are listed (the last to end)


@dataclass(frozen=True)
class Spell:
    device: str
    start_s: float
    end_s: float
    paused: int  # jobs paused for it
    waiting: int  # timings waiting for the device when it ended (the next then goes alone at once)


@dataclass(frozen=True)
class Timeline:
    device: str
    spells: int
    first_s: float
    last_s: float
    alone_s: float
    gaps_s: float
    gap_median_s: float
    gap_p90_s: float
    gap_max_s: float
    short_gaps_s: float  # the gaps under LONG_GAP_S, summed
    long_gaps_s: list[float]  # the others, in order
    ended_with_one_waiting: int


@dataclass(frozen=True)
class EndedJob:
    end_s: float
    took_s: float
    paused_s: float
    ended: str  # how (``ENDS``)
    file: str  # the file it checked ("" in a log that does not name it)

    @property
    def own_s(self) -> float:
        """The time it ran, its pauses left out."""
        return max(0.0, self.took_s - self.paused_s)


@dataclass(frozen=True)
class Stall:
    device: str
    start_s: float
    in_the_way: int  # jobs sharing the device when its timing found it busy
    end_s: float | None  # when the device was next alone (None: never, in this log)
    last_check: str  # the last check to end before then: "FILE ended" (``ENDS``; "" if none)


def stalls(lines: list[str]) -> list[Stall]:
    """Each time a timing found the device busy with a paused job's work (the jobs then sharing it in the way), and
    how long until the device was next alone."""
    found: list[Stall] = []
    open_at: dict[str, tuple[float, int]] = {}
    last_check = ""
    for line in lines:
        if (m := ENDED.search(line)) and m.group(2) == "check":
            last_check = f"{m.group(3) or 'a check'} {ENDS[m.group(4)]}"
        elif m := STALLED.search(line):
            open_at.setdefault(m.group(2), (int(m.group(1)) / 1e3, int(m.group(3))))
        elif (m := ALONE.search(line)) and m.group(2) in open_at:
            start, jobs = open_at.pop(m.group(2))
            found.append(Stall(m.group(2), start, jobs, int(m.group(1)) / 1e3, last_check))
    found += [Stall(device, start, jobs, None, "") for device, (start, jobs) in open_at.items()]
    return found


def ended_jobs(lines: list[str], kind: str) -> list[EndedJob]:
    """The jobs of `kind` ("check", "bench", ...) that ended in the log, the last to end first."""
    found = []
    for line in lines:
        m = ENDED.search(line)
        if m and m.group(2) == kind:
            end_s, took_s, paused_s = int(m.group(1)) / 1e3, float(m.group(5)), float(m.group(6) or 0.0)
            found.append(EndedJob(end_s, took_s, paused_s, ENDS[m.group(4)], m.group(3) or ""))
    return sorted(found, key=lambda c: -c.end_s)


def paused_checks(lines: list[str]) -> list[EndedJob]:
    """The check jobs paused at least ``LONG_GAP_S`` by timings, the last to end first."""
    return [c for c in ended_jobs(lines, "check") if c.paused_s >= LONG_GAP_S]


def spells(lines: list[str]) -> list[Spell]:
    """The spells in a log, per device in the order they began (a spell without its end is left out)."""
    began: dict[str, tuple[float, int]] = {}
    found: list[Spell] = []
    for line in lines:
        if m := ALONE.search(line):
            began[m.group(2)] = (int(m.group(1)) / 1e3, int(m.group(3)))
        elif (m := SHARED.search(line)) and m.group(2) in began:
            start, paused = began.pop(m.group(2))
            found.append(Spell(m.group(2), start, int(m.group(1)) / 1e3, paused, int(m.group(3))))
    return found


def timelines(found: list[Spell]) -> list[Timeline]:
    by_device: dict[str, list[Spell]] = defaultdict(list)
    for spell in found:
        by_device[spell.device].append(spell)
    out = []
    for device, own in sorted(by_device.items()):
        in_order = [max(0.0, b.start_s - a.end_s) for a, b in itertools.pairwise(own)]
        gaps = sorted(in_order) or [0.0]
        out.append(
            Timeline(
                device=device,
                spells=len(own),
                first_s=own[0].start_s,
                last_s=own[-1].end_s,
                alone_s=round(sum(s.end_s - s.start_s for s in own), 3),
                gaps_s=round(sum(gaps), 3),
                gap_median_s=round(statistics.median(gaps), 3),
                gap_p90_s=round(gaps[int(0.9 * (len(gaps) - 1))], 3),
                gap_max_s=round(gaps[-1], 3),
                short_gaps_s=round(sum(g for g in gaps if g < LONG_GAP_S), 3),
                long_gaps_s=[round(g, 3) for g in in_order if g >= LONG_GAP_S],
                ended_with_one_waiting=sum(1 for s in own if s.waiting > 0),
            )
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path, help="stderr of `geak -vv eval ...` or `geak -vv run ...`")
    parser.add_argument("--json", action="store_true", help="print one JSON object per device")
    args = parser.parse_args(argv)
    try:
        lines = args.log.read_text(errors="replace").splitlines()
    except OSError as e:
        print(f"spell_timeline: {e}", file=sys.stderr)
        return 2
    found = timelines(spells(lines))
    if not found:
        print("spell_timeline: no spell in the log (was it written by `geak -vv`?)", file=sys.stderr)
        return 2
    for t in found:
        if args.json:
            print(json.dumps(asdict(t)))
            continue
        print(
            f"{t.device}: {t.spells} spells alone from {t.first_s:.1f} s to {t.last_s:.1f} s, {t.alone_s:.1f} s alone, "
            f"{t.gaps_s:.1f} s of gaps (median {t.gap_median_s:.3f} s, 90th percentile {t.gap_p90_s:.3f} s, longest "
            f"{t.gap_max_s:.3f} s; {t.short_gaps_s:.1f} s under {LONG_GAP_S:.0f} s"
            + (f", longer: {', '.join(f'{g:.1f} s' for g in t.long_gaps_s)}" if t.long_gaps_s else "")
            + f"); {t.ended_with_one_waiting} ended with another timing waiting"
        )
    checks = paused_checks(lines)
    if checks and not args.json:
        listed = "; ".join(
            f"{c.file + ' ' if c.file else ''}{c.ended} at {c.end_s:.1f} s "
            f"after {c.took_s:.1f} s, "
            f"{c.paused_s:.1f} s of it paused"
            for c in checks[:LISTED_CHECKS]
        )
        print(f"checks paused {LONG_GAP_S:.0f} s or more: {len(checks)}, the last to end first: {listed}")
    timings = ended_jobs(lines, "bench")
    if timings and not args.json:
        listed = "; ".join(
            f"at {t.end_s:.1f} s after {t.took_s:.1f} s, {t.own_s:.1f} s of it its own" for t in timings[:LISTED_CHECKS]
        )
        print(f"timings to end last: {listed}")
    for s in [] if args.json else stalls(lines):
        held = f"none alone for {s.end_s - s.start_s:.1f} s" if s.end_s is not None else "none alone again in the log"
        after = f" (the last check to end before: {s.last_check})" if s.last_check and s.end_s is not None else ""
        print(f"{s.device}: stalled at {s.start_s:.1f} s, {s.in_the_way} job(s) in the way, {held}{after}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
