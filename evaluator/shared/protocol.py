"""What the trusted side and a job agree on without trusting the job: the jobs it is sent, the names of the files
it writes, and how often it reports progress.

A job's result message says which tests passed and which probes ran, but the trusted side never takes a file name
from it: it derives each name here, from the test it expected or the probe it handed out, and reads only those
files (``compare.load_output`` refuses links and odd files).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, fields
from typing import Any, Literal

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
HEARTBEAT_S = 1.0  # a job on the interpreter reports how many programs it ran at most this often
# keys of a progress message that says a step lives, not that one starts: the programs the interpreter ran, a
# compile that lasts and its end (``job.compile.watch``)
HEARTBEAT_KEYS = frozenset({"programs", "compiling", "compiled"})
# What Triton raises where a kernel does not compile for the device (a job also reports an error its AMD backend's
# compiler raised as a compile error: ``job/error_reports.compile_failure``).
COMPILE_ERRORS = frozenset(
    {"CompilationError", "CompileTimeAssertionFailure", "UnsupportedLanguageConstruct", "PTXASError", "OutOfResources"}
)


def output_file_of_test(test: str, run: str = "") -> str:
    """The output file of a test (a function name or a pytest node id), safe as a file name. `run`: "" (the
    test's run), or "again" (the reference's second run, which shows whether its output is reproducible)."""
    safe = _UNSAFE.sub("_", test)[:80]
    if safe != test:
        safe += "-" + hashlib.sha256(test.encode()).hexdigest()[:10]
    return f"{safe}{'.' + run if run else ''}.pt"


def probe_input_file(index: int) -> str:
    return f"probe_in_{index}.pt"


def probe_output_file(index: int, run: str = "") -> str:
    """`run`: "" (the real run), "again" (the reference's second run) or "ghost" (kernels as no-ops)."""
    return f"fresh_{index}{'_' + run if run else ''}.pt"


LARGE_OUTPUT_BYTES = 64 << 20  # a call writing more than this has its timed outputs checked on one input set
REPRODUCED = "the same as the first run"  # saved as the reference's second run when it reproduced the first exactly


def timed_output_sets(input_sets: int, output_bytes: int = 0) -> list[int]:
    """The input sets whose outputs are checked after the timed calls: the first and the last (of at most 4); only
    the last for a call that writes more than ``LARGE_OUTPUT_BYTES`` (what it writes is saved, read back and compared
    for each checked set)."""
    count = max(1, min(int(input_sets), 4))
    return [count - 1] if output_bytes > LARGE_OUTPUT_BYTES else sorted({0, count - 1})


def screen_output_file(label: str, call: int, run: str = "") -> str:
    """Outputs of a screened variant's call on the test's own inputs ("reference", or a variant "v<n>"); `run` "again"
    for the reference's second run (which outputs it reproduces)."""
    if not re.fullmatch(r"reference|v\d+", label):
        raise ValueError(f"unknown screened variant {label!r}")
    return f"screen_{label}_{int(call)}{'_' + run if run else ''}.pt"


def timed_output_file(label: str, call: int, input_set: int, run: str = "") -> str:
    """Outputs of a variant's ("reference"/"candidate") timed call on an input set after the timed batch; `run`
    "again" for the reference's second run on the same inputs."""
    if label not in ("reference", "candidate"):
        raise ValueError(f"unknown variant {label!r}")
    return f"timed_{label}_{int(call)}_{int(input_set)}{'_' + run if run else ''}.pt"


# ----------------------------------------------------------------------------------------- jobs
# What the trusted side asks a worker to do. Built only by `check.check_job`, `bench.bench_job`, `screen.screen_job`,
# `profile.profile_job` and the evaluator's peaks request, from `EvalOptions` (where every default lives); sent as
# JSON; read back by the worker with `job_from_dict`, which refuses a job with a field missing or unknown. No field
# has a default here.


@dataclass(frozen=True)
class CheckJob:
    kind: Literal["check"]
    scratch: str  # the only directory the job may write to
    path: str
    module_name: str
    tests: list[str]
    test_style: str
    output_source: str
    benchmarks: list[str]
    wrappers: list[str]
    outputs_dir: str
    max_calls: int
    seed: int
    probes: dict[str, Any] | None  # {"make": {"seed": S, "variants": V}} (reference) or {"replay": [...]} (candidate)
    repeat_tests: bool  # a reference runs its tests twice: which outputs reproduce?
    poison: bool  # fill new allocations with NaN / the largest integer
    cache: dict[str, Any] | None  # cache_request
    cwd: str | None
    probe_stall_s: float  # a probe silent this long (or longer: ``probe_rules.probe_stall_s``) ends the job as hung
    # Test outcomes that end the run (the rest are reported skipped, no probe runs): a reference's run ends where it
    # can no longer serve as the reference (``check.reference_stop_kinds``); empty: every test runs.
    stop_kinds: list[str]
    # Processes the job may compile in ahead of its tests (``job/compile/dry_pass``): its share of the host's cores;
    # 0: none (many jobs share the host, or the interpreter).
    compile_workers: int
    # A module of a repository judged by the repository's tests (``job/repository.py``): its root, configuration file,
    # dotted name, the folders put first on sys.path and the tests' node ids; None: a file with its own tests.
    repository: dict[str, Any] | None


@dataclass(frozen=True)
class BenchJob:
    kind: Literal["bench"]
    scratch: str
    modules: list[dict[str, Any]]
    functions: list[str]
    pytest_functions: list[str]
    rounds: dict[str, Any]  # speedup.RoundPlan: fixed, or sequential until the speedup is decided
    seed: int
    rep_ms: float
    max_calls: int
    profile: bool
    outputs_dir: str
    input_seed: int
    cache: dict[str, Any] | None


@dataclass(frozen=True)
class ScreenJob:
    kind: Literal["screen"]
    scratch: str
    modules: list[dict[str, Any]]  # the reference ("reference") first, then the variants ("v1", "v2", ...)
    functions: list[str]  # the test (or bench) functions whose wrapper calls are screened
    pytest_functions: list[str]
    seed: int
    max_calls: int
    outputs_dir: str
    plan: dict[str, Any]  # screening.ScreenPlan
    cache: dict[str, Any] | None


@dataclass(frozen=True)
class PeaksJob:
    kind: Literal["peaks"]
    measure: bool


@dataclass(frozen=True)
class ProfileJob:
    kind: Literal["profile"]
    scratch: str
    modules: list[dict[str, Any]]  # the one file profiled
    functions: list[str]  # its bench (or test) functions, whose captured wrapper calls are profiled
    pytest_functions: list[str]
    seed: int
    max_calls: int
    timeout_s: float  # the profiler's own run, at most
    cache: dict[str, Any] | None


Job = CheckJob | BenchJob | ScreenJob | PeaksJob | ProfileJob
_KINDS: dict[str, type] = {
    "check": CheckJob,
    "bench": BenchJob,
    "screen": ScreenJob,
    "peaks": PeaksJob,
    "profile": ProfileJob,
}


def job_from_dict(data: dict[str, Any]) -> Job:
    """The job a worker was sent; ValueError when it is not exactly one of the kinds."""
    cls = _KINDS.get(data.get("kind"))  # type: ignore[arg-type]
    if cls is None:
        raise ValueError(f"unknown job kind {data.get('kind')!r}")
    names = {f.name for f in fields(cls)}
    if set(data) != names:
        missing, unknown = sorted(names - set(data)), sorted(set(data) - names)
        raise ValueError(f"{data['kind']} job: missing {missing}, unknown {unknown}")
    return cls(**data)


def cache_request(seed: str | list[str] | None, keep: str | None) -> dict[str, Any]:
    """A job's `cache` field: which trusted compile caches to start from (a key, or several merged in order), and
    under which key to keep what it compiles (``job/compile/trusted_cache.py``)."""
    return {"seed": seed, "keep": keep}
