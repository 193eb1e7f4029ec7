"""What an evaluation may be asked to do differently: the one place where its settings and their defaults live."""

from __future__ import annotations

from dataclasses import dataclass, field

from .compare import Tolerance
from .compile_store import default_root
from .shared.sequential import MAX_ROUNDS


@dataclass
class EvalOptions:
    timeout_s: float = 300.0  # per worker job (one check of one file)
    fresh_inputs: bool = True  # re-run captured calls with fresh random inputs against the reference
    probe_variants: bool = True  # ...and at other sizes and on other values (shape and value probes)
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
