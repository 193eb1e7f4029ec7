"""The check job sent to a worker, the reference's run kept for its candidates, and the comparison of a candidate's
outputs with the reference's: what ``verdict`` judges from."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .compare import UnreadableOutput, compare, load_output, output_size, side_by_side
from .options import EvalOptions
from .pool import JobOutcome, usable_cores
from .reference_probes import ReferenceProbes, rejudged_after_rerun
from .reproduction import Masks, differences, prefixed, two_runs
from .results import FAILED_KINDS, NOT_RUN_KINDS, CheckResult, Comparison, Mismatch
from .shared.probe_rules import KIND_WORDS, probe_where
from .shared.protocol import COMPILE_ERRORS, CheckJob, output_file_of_test, probe_output_file
from .shared.test_ids import sanitized_test_id
from .triton_file import TritonFile


def check_job(
    path: Path,
    module_name: str,
    owner: TritonFile,
    job_dir: Path,
    options: EvalOptions,
    probes: dict[str, Any] | None,
    cache: dict[str, Any] | None = None,
    poison: bool = True,
    reference_run: bool = False,
    stop_kinds: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """`probes`: {"make": {"seed": S, "variants": V}} for a reference run (draw, save and run probes: fresh values,
    and with V other sizes and values), {"replay":
    [probe, ...]} for a candidate (run the reference's saved probes, copied into `job_dir`), or None. `cache`:
    the trusted compile cache to start from and to keep into (``protocol.cache_request``)."""
    return asdict(
        CheckJob(
            kind="check",
            scratch=str(job_dir),
            path=str(path),
            module_name=module_name,
            tests=list(owner.tests),
            test_style=owner.test_style,
            output_source=owner.output_source,
            benchmarks=list(owner.benches) if owner.test_style == "pytest" else [],
            wrappers=list(owner.entry_points),
            outputs_dir=str(job_dir / "outputs"),
            max_calls=options.max_fresh_calls,
            seed=options.seed,
            probes=probes,
            repeat_tests=reference_run,
            poison=poison,
            cache=cache,
            cwd=str(Path(owner.path).resolve().parent) if Path(owner.path).exists() else None,
            probe_stall_s=options.probe_stall_s,
            stop_kinds=sorted(stop_kinds),
            compile_workers=compile_workers(options) if owner.repository is None else 0,  # the dry pass imports a file
            repository=limited(owner.repository, options),
        )
    )


def limited(repository: dict[str, Any] | None, options: EvalOptions) -> dict[str, Any] | None:
    """A repository's job dict with the options' limits on its cases (``job/case_limits.py``), none where it asks
    for every case."""
    if repository is None:
        return None
    if repository.get("every_case"):
        return {**repository, "cases_per_test": None, "budget_s": None}
    return {**repository, "cases_per_test": options.cases_per_test, "budget_s": options.tests_budget_s}


def compile_workers(options: EvalOptions) -> int:
    """The processes a check job may compile its kernels in ahead of its tests: its share of the cores beside the
    jobs that may run at once on this host (none on the interpreter, which compiles nothing)."""
    if options.backend == "interpreter":
        return 0
    return usable_cores() // max(1, options.host_jobs or options.max_concurrent)


def reference_stop_kinds(poison: bool) -> frozenset[str]:
    """Where a reference's own run may end: any failed test refuses it (``reference_problem``), but with poisoning a
    test that raised is what sends it to run again unpoisoned (``failed_by_error``), and a wrong result does not, so
    that run goes on past wrong results to an error. (ROCm `gemm.py` on NVIDIA: 484 tests, each raising, run twice.)"""
    return frozenset({"error"}) if poison else FAILED_KINDS


@dataclass
class ReferenceRun:
    """A reference's check job, kept for the candidates compared with it."""

    tfile: TritonFile
    outcome: JobOutcome
    outputs: Path
    probes: ReferenceProbes | None  # None when not checkable
    not_checkable: CheckResult | None = None  # the reference's own verdict when this backend cannot check it
    cache_key: str | None = None  # its trusted compile cache (job/compile/trusted_cache.py)
    unstable: dict[str, tuple[str, ...]] = field(default_factory=dict)  # test -> outputs that do not reproduce
    unwritten: dict[str, Masks] = field(default_factory=dict)  # output file -> elements it never writes
    poison: bool = True  # False: its tests read memory nothing wrote, so jobs run without poisoned allocations
    reran: bool = False  # ran again after a candidate disagreed with it (``rerun_variation``)
    own: CheckResult | None = None  # its verdict as a file alone (the same tests: ``Evaluator.check_against_self``)
    users: int = 0  # checks against it now running
    forgotten: bool = False  # dropped by ``Evaluator.forget_reference``: its outputs go once `users` is 0


def test_reproduction(
    result: dict[str, Any], out_dir: Path, options: EvalOptions
) -> tuple[dict[str, tuple[str, ...]], dict[str, Masks]]:
    """From the reference's two runs of its tests on the same inputs: the outputs of each test that differ
    between them (races, duplicate scatter indices: where they sit in the test's output), and the elements each
    output file leaves unwritten (``reproduction``)."""
    unstable, unwritten = {}, {}
    for test in result.get("tests", []):
        if test.get("kind") != "pass":
            continue
        name = output_file_of_test(test["name"])
        masks, paths = two_runs(out_dir / name, out_dir / output_file_of_test(test["name"], "again"), options)
        if paths:
            unstable[test["name"]] = paths
        if masks:
            unwritten[name] = masks
    return unstable, unwritten


def rerun_variation(ref_run: ReferenceRun, result: dict[str, Any], rerun_dir: Path, options: EvalOptions) -> bool:
    """Fold a rerun of the reference (a fresh process, the same seeded inputs: its tests twice, its usable probes
    once; or a candidate whose program is the reference's: its tests once) into `ref_run`: an output that differs
    from the first run's is nondeterministic, however rarely, so it leaves the comparison (tests) or the probes
    (probes). A candidate's mismatch then only stands where the reference reproduces itself. Returns whether
    anything new was found."""
    first_dir, found = ref_run.outputs / "outputs", False
    for test in result.get("tests", []):
        if test.get("kind") != "pass":
            continue
        name, first = test["name"], output_file_of_test(test["name"])
        paths = set(ref_run.unstable.get(name, ()))
        before = len(paths)
        masks = ref_run.unwritten.get(first, {})
        for run in ("", "again"):
            later = rerun_dir / output_file_of_test(name, run)
            paths.update(m.where for m in differences(first_dir / first, later, options, masks))
        if len(paths) > before:
            ref_run.unstable[name] = tuple(sorted(paths))
            found = True
    probes = ref_run.probes
    if probes is None:
        return found
    ref_run.probes, changed = rejudged_after_rerun(probes, result, first_dir, rerun_dir, options)
    return found or changed


def failed_by_error(outcome: JobOutcome) -> bool:
    """Did a test of the job raise (not a wrong result, a crash or running out of time), with an error poisoned
    allocations may explain: not a kernel that does not compile for the device (``COMPILE_ERRORS``, or what the job
    found raised by a backend's compiler), which fails alike unpoisoned, so running it again would only double a long
    run of failing compiles?"""
    tests = (outcome.result or {}).get("tests") or []
    return outcome.status == "ok" and any(
        t.get("kind") == "error" and not _compile_failure(t.get("error")) for t in tests
    )


def _compile_failure(error: Any) -> bool:
    error = error if isinstance(error, dict) else {}
    return error.get("type") in COMPILE_ERRORS or error.get("compile_error") is True


def compile_at_end(progress: dict[str, Any] | None) -> str:
    """The words for a job that was compiling when its time ran out, as its last progress said
    (``job/compile/watch.py``): ", while compiling K[num_warps=1, num_stages=2] (for 183 s by then)", or ""."""
    what = (progress or {}).get("compiling")
    if not isinstance(what, str) or not what:
        return ""
    begun = progress.get("begun")
    lasted = time.time() - begun if isinstance(begun, (int, float)) and not isinstance(begun, bool) else None
    return f", while compiling {what[:200]}" + (f" (for {lasted:.0f} s by then)" if lasted and lasted >= 1 else "")


def reference_problem(outcome: JobOutcome) -> str | None:
    """Why a reference run cannot serve as the reference (None when it passed its tests)."""
    if outcome.status != "ok" or outcome.result is None:
        compiling = compile_at_end(outcome.last_progress) if outcome.status == "timeout" else ""
        return f"{outcome.message}{compiling}\n{outcome.log_tail[-1500:]}".strip()
    result = outcome.result
    if result.get("worker_error"):
        return result["worker_error"]
    if result.get("import_error"):
        return result["import_error"]["message"]
    failed = [t for t in result["tests"] if t["kind"] in FAILED_KINDS]
    if failed:
        return "; ".join(f"{t['name']}: {t['message']}" for t in failed)
    if all(t["kind"] in NOT_RUN_KINDS for t in result["tests"]):
        return "no test ran" + "".join(f"; {t['name']}: {t['message']}" for t in result["tests"][:3])
    return None


def compare_with_reference(
    reported: list[dict[str, Any]],
    result: dict[str, Any],
    ref_run: ReferenceRun,
    job_dir: Path,
    options: EvalOptions,
) -> Comparison:
    """Every output the reference produced must be matched: each test's, and each usable probe's. Then the ghost
    rule: if on every informative probe the candidate's outputs are right even with its kernels turned into no-ops,
    the kernels did not compute them. The outputs are weighed several at once (``_weigh_all``)."""
    ref_result = ref_run.outcome.result or {}
    ref_dir, cand_dir = ref_run.outputs / "outputs", job_dir / "outputs"
    found: list[Mismatch | _Weighing] = []  # in the order they are reported

    ref_tests = {t["name"]: t for t in ref_result.get("tests", [])}
    for test in reported:
        ref_test = ref_tests[test["name"]]
        if ref_test["kind"] in NOT_RUN_KINDS:
            continue
        if test["kind"] in NOT_RUN_KINDS:  # e.g. a skip condition the candidate's code turned true
            found.append(Mismatch(test["name"], f"did not run ({test['message']}), but ran for the reference"))
            continue
        name = output_file_of_test(test["name"])
        if not (ref_dir / name).exists():  # the reference's case produced no output (no result_gold entry)
            continue
        if _launched(ref_test) and not _launched(test):
            found.append(
                Mismatch(
                    test["name"],
                    "no Triton kernel was launched (the work ran elsewhere, "
                    "e.g. in PyTorch): the candidate must run its kernels",
                )
            )
        where = f"{test['name']} → {output_label(ref_run.tfile, test['name'])}"
        undefined = prefixed(ref_run.unwritten.get(name, {}), where)
        unstable = tuple(ref_run.unstable.get(test["name"], ()))
        found.append(_Weighing(where, ref_dir / name, cand_dir / name, undefined, unstable=unstable))

    probes = ref_run.probes
    cand_fresh = {f.get("index"): f for f in result.get("fresh") or [] if isinstance(f, dict)}
    for probe in probes.usable:
        index = probe["index"]
        where = _probe_shown(probe)
        entry = cand_fresh.get(index)
        if entry is None or entry.get("status") != "ok":
            message = entry.get("message") if isinstance(entry, dict) else None
            found.append(Mismatch(where, str(message or "the call reported no result")))
            continue
        if sum(probe.get("launches", {}).values()) and not _launched(entry):
            found.append(Mismatch(where, "no Triton kernel was launched"))
        name = probe_output_file(index)
        undefined = prefixed(probes.unwritten.get(name, {}), where)
        ghost = cand_dir / probe_output_file(index, "ghost") if index in probes.informative else None
        found.append(_Weighing(where, ref_dir / name, cand_dir / name, undefined, probe.get("kind", "fresh"), ghost))

    weighed = iter(_weigh_all([f for f in found if isinstance(f, _Weighing)], options))
    mismatches: list[Mismatch] = []
    compared, done, ghosts_right, ghosts_judged = 0, dict.fromkeys(KIND_WORDS, 0), 0, 0
    for item in found:
        if isinstance(item, Mismatch):
            mismatches.append(item)
            continue
        said = next(weighed)
        mismatches += said.mismatches
        if said.read and item.kind is None:
            compared += 1
        elif said.read:
            done[item.kind] += 1
        if said.ghost_right is not None:
            ghosts_judged += 1
            ghosts_right += said.ghost_right
    if ghosts_judged and ghosts_right == ghosts_judged:
        mismatches.append(
            Mismatch(
                "ghost replay",
                "the outputs are right even with every Triton launch turned into a no-op: the outputs do not "
                "depend on the kernels (the work ran elsewhere, e.g. in PyTorch)",
            )
        )
    notes = probes.skipped + tuple(
        f"{test}: the reference's own output{' ' + ', '.join(paths) if any(paths) else ''} differs between two runs "
        "on the same inputs (nondeterministic), so that part is not compared"
        for test, paths in ref_run.unstable.items()
    )
    if probes.usable and not probes.informative:
        notes = (*notes, "ghost replay not possible: no probe's outputs depend on the reference's kernels")
    return Comparison(
        not mismatches,
        compared,
        done["fresh"],
        tuple(mismatches),
        tuple(notes),
        probes_skipped=len(probes.skipped),
        shape_calls=done["shape"],
        value_calls=done["value"],
    )


@dataclass(frozen=True)
class _Weighing:
    """One output of the candidate to weigh against the reference's: a test's (`kind` None, where the parts the
    reference does not reproduce, `unstable`, are not held against it) or a probe's (and, for an informative probe,
    its replay with the kernels as no-ops, `ghost`)."""

    where: str
    ref: Path
    cand: Path
    undefined: Masks
    kind: str | None = None
    ghost: Path | None = None
    unstable: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Weighed:
    mismatches: list[Mismatch]
    read: bool  # both outputs were read and compared
    ghost_right: bool | None = None  # whether the ghost replay's output matched (None: no ghost weighed)


def _weigh_all(weighings: list[_Weighing], options: EvalOptions) -> list[_Weighed]:
    """Each weighing's outcome, in order; several run at once (``side_by_side``), each holding two outputs."""
    sizes = [output_size(w.ref) + max(output_size(w.cand), output_size(w.ghost) if w.ghost else 0) for w in weighings]
    with ThreadPoolExecutor(side_by_side(max(sizes, default=0))) as pool:
        return list(pool.map(lambda w: _weigh(w, options), weighings))


def _weigh(w: _Weighing, options: EvalOptions) -> _Weighed:
    mismatches: list[Mismatch] = []

    def load(path: Path, where: str) -> Any:
        try:
            return load_output(path)
        except UnreadableOutput as e:
            mismatches.append(Mismatch(where, f"no readable output ({e})"))
            return _MISSING

    ref_out, cand_out = load(w.ref, w.where), load(w.cand, w.where)
    if ref_out is _MISSING or cand_out is _MISSING:
        return _Weighed(mismatches, False)
    for m in compare(ref_out, cand_out, w.where, options.tolerances, w.undefined):
        path = m.where[len(w.where) :]
        if not any(path == u or path.startswith(u) for u in w.unstable):
            mismatches.append(m)
    del cand_out
    if w.ghost is None:
        return _Weighed(mismatches, True)
    ghost = load(w.ghost, f"{w.where} (kernels as no-ops)")
    if ghost is _MISSING:
        return _Weighed(mismatches, True)
    return _Weighed(mismatches, True, not compare(ref_out, ghost, w.where, options.tolerances, w.undefined))


_MISSING = object()


def _probe_shown(probe: dict[str, Any]) -> str:
    """A probe as a mismatch names it: a shape or value probe with what it changed, `other sizes #2 row_sum(f32[8,160])
    (multiples of the reference's unmasked blocks only (128→160))`."""
    label = probe.get("label") if probe.get("kind", "fresh") != "fresh" else None
    return f"{probe_where(probe)} ({label})" if label else probe_where(probe)


def output_label(owner: TritonFile, test: str) -> str:
    return f"result_gold[{sanitized_test_id(test)!r}]" if owner.output_source == "result_gold" else "return"


def _launched(entry: dict[str, Any]) -> bool:
    launches = entry.get("launches")
    return isinstance(launches, dict) and any(isinstance(v, int) and v > 0 for v in launches.values())
