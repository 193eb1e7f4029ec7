"""What an evaluation may be asked to do differently: the one place where its settings and their defaults live."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from .compare import Tolerance
from .compile_store import default_root
from .shared.sequential import MAX_ROUNDS


@dataclass
class EvalOptions:
    timeout_s: float = 300.0  # per worker job (one check of one file)
    fresh_inputs: bool = True  # re-run captured calls with fresh random inputs against the reference
    probe_variants: bool = True  # ...and at other sizes and on other values (shape and value probes)
    probe_budget_s: float | None = None  # seconds a candidate replays shape and value probes in (None: a share of
    # its check, as the reference's runs measure it; a fixed budget makes which probes are made independent of speed)
    max_fresh_calls: int = 8
    probe_stall_s: float = 60.0  # a probe whose run says nothing this long (5x the tests' own, where longer) hung
    seed: int = 42  # Python, NumPy and torch are seeded with it before the import, each test and each replay
    tolerances: dict[str, Tolerance] = field(default_factory=dict)
    bench_rounds: int | None = None  # a fixed number of timing rounds; None: until the speedup is decided
    max_bench_rounds: int = MAX_ROUNDS  # the most rounds a sequential timing takes
    max_rounds_s: float = 0.0  # past this many seconds of rounds a sequential timing stops undecided (0: no limit)
    rep_ms: float = 25.0
    max_bench_calls: int = 16
    measure_peaks: bool = True
    profile_kernels: bool = True
    backend: str = "auto"  # auto | gpu | interpreter
    spares: int = 1
    max_concurrent: int = 1
    host_jobs: int | None = None  # jobs at once on this host, all evaluators together (None: max_concurrent): their
    # CPU thread pools share the cores (``pool.cpu_threads_per_job``)
    gpu_id: int | None = None
    isolation: str = "auto"  # auto | namespaces (required) | process (off): see isolation.py
    compile_cache: str | None = field(default_factory=default_root)  # kept between runs (None: the pool's own)
    # A repository's module (``repo_tests``): its tests' cases at most this many per test function, spread over its
    # parameters, and no case started past this many seconds of a run once one has run; None: all of them (what a
    # proposal's confirmation runs). What is left out is said (kind "left out").
    cases_per_test: int | None = None
    tests_budget_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The options as plain JSON data (each tolerance as {"rtol", "atol", "floor"}): ``from_dict`` reads it back."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalOptions:
        """The options `data` gives (``to_dict``'s form; a field left out keeps its default). A key that names no
        option, or a tolerance that is not exactly {"rtol", "atol", "floor"}, is a ValueError."""
        _refuse_unknown(data, {f.name for f in fields(cls)}, "evaluator option")
        given = dict(data)
        if "tolerances" in given:
            given["tolerances"] = {dtype: _tolerance(dtype, t) for dtype, t in given["tolerances"].items()}
        return cls(**given)


def _tolerance(dtype: str, data: Any) -> Tolerance:
    if not isinstance(data, dict):
        raise ValueError(f"the tolerance for {dtype} must be a mapping of rtol, atol and floor, not {data!r}")
    names = {f.name for f in fields(Tolerance)}
    _refuse_unknown(data, names, f"tolerance field for {dtype}")
    if missing := sorted(names - data.keys()):
        raise ValueError(f"the tolerance for {dtype} lacks {', '.join(missing)}")
    return Tolerance(**data)


def _refuse_unknown(data: dict[str, Any], known: set[str], what: str) -> None:
    if unknown := sorted(data.keys() - known):
        raise ValueError(f"unknown {what}(s): {', '.join(map(str, unknown))} (known: {', '.join(sorted(known))})")
