"""The reference's probes as the trusted side judges them: which can judge a candidate, which cannot and why.

The reference is the oracle. A probe is skipped (with its reason, in the verdict's notes) where the reference
refuses or fails on its inputs, gives different results when run twice on them (nondeterministic), leaves part of
its outputs unwritten at other sizes where it writes all of them at the tested ones (it may not support those
sizes), or computes more non-finite values on larger values than on the tested range (past where it computes).
Elements it never writes on a usable probe are undefined and not compared (``reproduction``).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .compare import UnreadableOutput, compare, load_output, output_size, side_by_side
from .options import EvalOptions
from .reproduction import Masks, differences, prefixed, unwritten_elements
from .shared.probe_rules import (
    KIND_WORDS,
    OVER_BUDGET,
    nonfinite_elements,
    probe_of_run,
    probe_where,
    stays_finite,
)
from .shared.protocol import probe_output_file


@dataclass(frozen=True)
class ReferenceProbes:
    """The probes to hand to candidates (`usable`: the reference agrees with itself on them), which fresh ones can
    tell kernels from no kernels (`informative`, by the reference's own ghost run), the elements each leaves
    unwritten (`unwritten`, by output file), and why others were skipped."""

    usable: tuple[dict[str, Any], ...] = ()
    informative: frozenset[int] = frozenset()
    skipped: tuple[str, ...] = ()
    unwritten: dict[str, Masks] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        """Usable probes by kind."""
        found = dict.fromkeys(KIND_WORDS, 0)
        for probe in self.usable:
            found[probe.get("kind", "fresh")] += 1
        return found


def is_probe_where(where: str) -> bool:
    return where.startswith(tuple(KIND_WORDS.values()))


def judge_reference_probes(result: dict[str, Any], out_dir: Path, options: EvalOptions) -> ReferenceProbes:
    usable, informative, skipped, unwritten = [], set(), [], {}
    finite: dict[int, int] = {}  # fresh probe -> non-finite elements of its outputs
    complete: set[int] = set()  # fresh probes whose outputs the reference writes whole
    entries = [e for e in result.get("fresh") or [] if e.get("status") != OVER_BUDGET]  # made too late: nothing to say
    for entry, read in zip(entries, _read_all(entries, out_dir, options), strict=True):
        kind, index = entry.get("kind", "fresh"), entry.get("index")
        if kind != "fresh" and entry.get("of") not in finite:  # its call's fresh probe said why
            continue
        where = probe_where(entry)
        label = f" ({entry['label']})" if kind != "fresh" and entry.get("label") else ""
        why = read.why or _unusable(kind, read, finite.get(entry.get("of"), 0), entry.get("of") in complete)
        if why:
            skipped.append(f"{where}{label}: {why}")
            continue
        if kind == "fresh":
            finite[index] = read.nonfinite
            if not read.masks:
                complete.add(index)
            if read.ghost_unread:
                skipped.append(f"{where}: {read.ghost_unread}")
                continue
            if read.ghost_differs:
                informative.add(index)
        usable.append({k: entry[k] for k in ("index", "kind", "label", "wrapper", "signature", "spec", "launches")})
        if read.masks:
            unwritten[probe_output_file(index)] = read.masks
    return ReferenceProbes(tuple(usable), frozenset(informative), tuple(skipped), unwritten)


@dataclass(frozen=True)
class _ProbeRead:
    """What one probe's own files say, read and weighed apart from the other probes'."""

    why: str | None = None  # unusable, whatever its call's fresh probe says
    masks: Masks = field(default_factory=dict)  # the elements the reference leaves unwritten
    nonfinite: int = 0  # non-finite elements of its first run's outputs
    ghost_differs: bool = False  # a fresh probe: the kernels-as-no-ops run gives other outputs (it can tell them)
    ghost_unread: str | None = None  # a fresh probe: why its ghost run's outputs cannot be read


def _read_all(entries: list[dict[str, Any]], out_dir: Path, options: EvalOptions) -> list[_ProbeRead]:
    """Each probe's reading, in order; several side by side (``side_by_side``), each holding its three outputs."""

    def size(entry: dict[str, Any]) -> int:
        index = entry.get("index")
        if not isinstance(index, int):
            return 0
        return sum(output_size(out_dir / probe_output_file(index, run)) for run in ("", "again", "ghost"))

    with ThreadPoolExecutor(side_by_side(max(map(size, entries), default=0))) as pool:
        return list(pool.map(lambda entry: _read_probe(entry, out_dir, options), entries))


def _read_probe(entry: dict[str, Any], out_dir: Path, options: EvalOptions) -> _ProbeRead:
    if entry.get("status") != "ok" or not isinstance(entry.get("index"), int):
        return _ProbeRead(entry.get("message") or "not replayable")
    index = entry["index"]
    try:
        real = load_output(out_dir / probe_output_file(index))
        again = load_output(out_dir / probe_output_file(index, "again"))
    except UnreadableOutput as e:
        return _ProbeRead(str(e))
    masks = unwritten_elements(real, again)
    if compare(real, again, "", options.tolerances, masks):
        return _ProbeRead(
            "the reference gives different results on the same inputs (nondeterministic, e.g. duplicate indices in "
            "a scatter, or a race), so it cannot judge a candidate there"
        )
    read = _ProbeRead(None, masks, nonfinite_elements(real))
    if entry.get("kind", "fresh") != "fresh":
        return read
    where = probe_where(entry)
    try:
        ghost = load_output(out_dir / probe_output_file(index, "ghost"))
    except UnreadableOutput as e:
        return replace(read, ghost_unread=str(e))
    return replace(read, ghost_differs=bool(compare(real, ghost, where, options.tolerances, prefixed(masks, where))))


def _unusable(kind: str, read: _ProbeRead, fresh_nonfinite: int, fresh_complete: bool) -> str | None:
    """Why a probe the reference agrees with itself on still cannot judge a candidate, by its call's fresh probe."""
    if kind == "shape" and read.masks and fresh_complete:
        return (
            "the reference leaves part of its outputs unwritten at these sizes, which it writes whole at the tested "
            "ones: it may not support them"
        )
    if kind == "value" and not stays_finite(fresh_nonfinite, read.nonfinite):
        return "the reference's outputs are not finite on these values"
    return None


def rejudged_after_rerun(
    probes: ReferenceProbes, result: dict[str, Any], first_dir: Path, rerun_dir: Path, options: EvalOptions
) -> tuple[ReferenceProbes, bool]:
    """The probes after a rerun of the reference in a fresh process (its usable probes replayed once, in
    `result`): one whose outputs differ from the first run's is nondeterministic, however rarely, and leaves; so
    does one the reference failed on this time (a read out of bounds that faults only where it lands: a probe can
    pass in one run and fault in the next). One the rerun did not reach (it stopped at an earlier fault) stays.
    Returns the probes and whether any left."""
    replayed = {f.get("index"): f for f in result.get("fresh") or [] if isinstance(f, dict)}

    def differs(probe: dict[str, Any]) -> bool:
        entry, output = replayed.get(probe["index"]), probe_output_file(probe["index"])
        if entry is None or entry.get("status") != "ok":
            return False
        masks = probes.unwritten.get(output, {})
        return bool(differences(first_dir / output, rerun_dir / output, options, masks, probe_where(probe)))

    largest = max((output_size(rerun_dir / probe_output_file(p["index"])) for p in probes.usable), default=0)
    with ThreadPoolExecutor(side_by_side(2 * largest)) as pool:  # each holds the first run's output and the rerun's
        differing = list(pool.map(differs, probes.usable))
    usable, skipped, found = [], list(probes.skipped), False
    for probe, different in zip(probes.usable, differing, strict=True):
        entry, where = replayed.get(probe["index"]), probe_where(probe)
        if entry is not None and entry.get("status") == "error":
            why = _error_line(str(entry.get("message") or ""))
            skipped.append(f"{where}: the reference failed on these inputs when run again ({why}), so it cannot "
                           "judge a candidate there")  # fmt: skip
            found = True
        elif different:
            skipped.append(f"{where}: the reference gave a different result when run again on the same inputs "
                           "(nondeterministic), so it cannot judge a candidate there")  # fmt: skip
            found = True
        else:
            usable.append(probe)
    return _keeping(probes, usable, skipped), found


def hung_probe(last_progress: dict[str, Any] | None) -> str | None:
    """The probe a job that timed out was running (its progress names it), or None where it was not in a probe."""
    running = (last_progress or {}).get("test")
    if not isinstance(running, str) or not is_probe_where(running):
        return None
    return probe_of_run(running)


def without_hung(probes: ReferenceProbes, where: str, why: str) -> ReferenceProbes:
    """The probes less the one named `where`, on which the reference's own code hung in a later run (a spin on
    locks that other programs set, say): a probe the reference does not finish every time cannot judge a
    candidate that does not finish it either."""
    usable = [p for p in probes.usable if probe_where(p) != where]
    if len(usable) == len(probes.usable):
        return probes
    return _keeping(probes, usable, [*probes.skipped, f"{where}: {why}, so it cannot judge a candidate there"])


def _keeping(probes: ReferenceProbes, usable: list[dict[str, Any]], skipped: list[str]) -> ReferenceProbes:
    """`probes` with only `usable` left usable (and informative) and `skipped` as the reasons for the others."""
    kept = {p["index"] for p in usable}
    return ReferenceProbes(tuple(usable), probes.informative & kept, tuple(skipped), probes.unwritten)


def is_usable(probes: ReferenceProbes | None, where: str) -> bool:
    return probes is not None and any(probe_where(p) == where for p in probes.usable)


def _error_line(message: str) -> str:
    """The line of a job's error message that names the error: its first (``describe_error`` writes the exception's
    type and message first; CUDA's hints about debugging come after)."""
    return next((line.strip() for line in message.splitlines() if line.strip()), "it raised")[:300]
