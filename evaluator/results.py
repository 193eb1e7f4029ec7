"""Plain-data results of the evaluator: JSON-ready, cacheable, and free of torch objects."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, is_dataclass
from typing import Any, Literal, TypeVar, get_args, get_origin, get_type_hints

from .shared.sequential import DEFAULT_NOISE_MARGIN

Stage = Literal["parse", "call", "exec", "perf"]
Backend = Literal["cuda", "rocm", "interpreter"]
Severity = Literal["error", "warning", "information"]

STAGES: tuple[Stage, ...] = ("parse", "call", "exec", "perf")


@dataclass(frozen=True)
class Diagnostic:
    """A message tied to a line of the user's file (1-based line and column), ready for an editor."""

    line: int
    column: int
    severity: Severity
    message: str
    end_line: int | None = None
    source: str = "geak"
    file: str | None = None


@dataclass(frozen=True)
class KernelInfo:
    """A `@triton.jit` function found in the file."""

    name: str
    line: int
    end_line: int
    autotuned: bool
    params: tuple[str, ...]
    constexprs: tuple[str, ...]


# Kinds of test outcome that are failures; the others are pass, xpass (passed although marked xfail), and the
# cases that did not run as a check: skipped, xfail (failed as expected), benchmark (run by the perf stage), left out
# (a repository's case not sampled, or past a check's budget: ``job/case_limits.py``).
FAILED_KINDS = frozenset({"assert", "error", "timeout", "crash"})
NOT_RUN_KINDS = frozenset({"skipped", "xfail", "benchmark", "left out"})
TEST_KINDS = FAILED_KINDS | NOT_RUN_KINDS | {"pass", "xpass"}


@dataclass(frozen=True)
class TestOutcome:
    """One test's result (a `test_*` function, or one pytest case named by its id, `test_x[4-fp16]`). `kind`: pass,
    assert (wrong result), error (raised), timeout, crash; for pytest cases also skipped, xfail, xpass, benchmark,
    left out.
    `ok`: not a failure (a skipped case is ok, but it checked nothing)."""

    __test__ = False  # not a pytest test class

    name: str
    ok: bool
    message: str = ""
    kind: str = "pass"
    duration_s: float = 0.0
    launches: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Mismatch:
    """Where a candidate's output differs from the reference's."""

    where: str
    message: str


@dataclass(frozen=True)
class Comparison:
    """Candidate outputs against reference outputs: the given tests, and the probes (fresh random inputs at the
    tested shapes: `fresh_calls`; other sizes; other values)."""

    ok: bool
    compared_outputs: int
    fresh_calls: int
    mismatches: tuple[Mismatch, ...] = ()
    notes: tuple[str, ...] = ()
    probes_skipped: int = 0  # probes the reference could not judge (why: in `notes`)
    shape_calls: int = 0  # calls compared at other sizes than the test's (shape probes)
    value_calls: int = 0  # calls compared on other values (value probes: larger, of one sign)


@dataclass(frozen=True)
class CheckResult:
    """The verdict of the parse → call → exec cascade. `not_checkable` (with `ok` False): the reason this backend
    (Triton's CPU interpreter) cannot check the file, which is then neither passed nor failed (`cpu_support`)."""

    ok: bool
    stage: Stage
    backend: Backend | None
    file: str
    message: str
    tests: tuple[TestOutcome, ...] = ()
    diagnostics: tuple[Diagnostic, ...] = ()
    kernels: tuple[KernelInfo, ...] = ()
    comparison: Comparison | None = None
    reference: str | None = None
    device: str | None = None
    duration_s: float = 0.0
    output_tail: str = ""
    caveats: tuple[str, ...] = ()
    not_checkable: str | None = None
    isolation: str | None = None  # how the job ran: "namespaces", "bwrap + namespaces" or "process only"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def summary(self) -> str:
        """Its message's first line."""
        return self.message.strip().splitlines()[0] if self.message.strip() else ""

    def caveats_beyond_summary(self) -> tuple[str, ...]:
        """The caveats its summary does not already say (a pass whose tests assert nothing says so there)."""
        return tuple(c for c in self.caveats if c not in self.summary)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckResult:
        return _from_dict(cls, data)


@dataclass(frozen=True)
class KernelProfile:
    """One compiled kernel as the vendor's profiler measured it, over its profiled launches (each figure weighted by
    the launches' durations): achieved occupancy (warps resident per active cycle over the SM's maximum, 0-1), the
    occupancy its resources allow, DRAM and SM throughput (% of their peaks), its mean duration and waves of thread
    blocks per SM. From rocprofv3 on an AMD GPU: wavefronts per CU, VALU busy as `sm_pct`, waves of workgroups per
    CU. None where the profiler did not say."""

    kernel: str
    hash: str
    launches: int
    achieved_occupancy: float | None = None
    theoretical_occupancy: float | None = None
    dram_pct: float | None = None
    sm_pct: float | None = None
    duration_us: float | None = None
    waves: float | None = None


@dataclass(frozen=True)
class ProfileResult:
    """What the vendor's profiler measured of a file's kernels over its captured calls (``Evaluator.profile``).
    `unavailable`: no profiler can run here (`message` says why); not a failure of the file."""

    ok: bool
    file: str
    message: str
    profiler: str | None = None
    kernels: tuple[KernelProfile, ...] = ()
    unavailable: bool = False
    device: str | None = None
    duration_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProfileResult:
        return _from_dict(cls, data)


@dataclass(frozen=True)
class CompiledKernelFacts:
    """What the compiler made of one kernel: registers per thread, spilled registers, shared memory per block, warps
    and pipeline stages, and the occupancy they allow (resident warps over the SM's maximum; estimated from the
    limits, None where unknown); where the vendor's profiler ran, what it measured (`measured`). On an AMD GPU
    (`amd`) the same in its words: VGPRs per lane, LDS per workgroup, wavefronts, a compute unit's maximum."""

    kernel: str
    n_regs: int | None = None
    n_spills: int | None = None
    shared_bytes: int | None = None
    num_warps: int | None = None
    num_stages: int | None = None
    occupancy: float | None = None
    limited_by: str | None = None  # what bounds the occupancy: "registers", "shared memory" or "warps" (AMD: "LDS",
    # "wavefronts")
    waves_per_simd: int | None = None  # AMD: the wavefronts a SIMD keeps of it, as the compiler computed
    scratch_bytes: int | None = None  # AMD: private (scratch) memory per lane, where registers spill
    amd: bool = False  # compiled for an AMD GPU: its facts are named in AMD's words
    hash: str = ""  # the compiled kernel's hash, as the job reported it ("" where unknown): which kernels are the same
    measured: KernelProfile | None = None  # what the vendor's profiler measured of it (``slowness.with_profile``)


@dataclass(frozen=True)
class CallTiming:
    """Timing of one captured wrapper call (`signature` names the wrapper and its argument shapes)."""

    wrapper: str
    signature: str
    median_ms: float
    spread_pct: float
    method: str
    bytes_moved: int
    gbps: float | None
    tflops: float | None
    pct_peak_bw: float | None
    pct_peak_flops: float | None
    cache: str
    kernel_ms: dict[str, float] = field(default_factory=dict)
    kernels: tuple[CompiledKernelFacts, ...] = ()  # what the compiler made of the kernels it launches


@dataclass(frozen=True)
class Speedup:
    """reference time / candidate time (Σ over calls), the geometric mean over pairs of interleaved rounds (A B | B A),
    with its interval at `confidence`; `rounds` counts the rounds timed.

    `verdict` is "faster" or "slower" only when the whole interval lies beyond 1 ± `margin` (the device's
    equivalence margin, from an A/A run), "within noise (±m%)" when it lies wholly inside, else "undecided (...)"
    with the rounds taken and, where known, why the interval stayed wide; `significant` says whether a difference
    is claimed, `decided` whether the interval settled either way."""

    ratio: float
    low: float
    high: float
    rounds: int
    significant: bool
    verdict: str
    margin: float = DEFAULT_NOISE_MARGIN
    decided: bool = True
    confidence: float = 0.95  # of the interval (``speedup.RoundPlan.confidence``)
    remeasured_from: float | None = None  # the first ratio, when a speedup above 10x was measured again


@dataclass(frozen=True)
class Peaks:
    """The device's ceilings: measured copy bandwidth and matmul rates (or a table's figures)."""

    device: str
    bandwidth_gbps: float
    tflops_16bit: float
    tflops_fp32: float
    source: str
    l2_bytes: int = 0
    l2_gbps: float = 0.0  # copy bandwidth of data resident in L2 (the ceiling of hot-cache timings); 0 if unknown
    noise_margin: float = DEFAULT_NOISE_MARGIN  # A/A equivalence margin of a speedup on this device
    units: int = 0  # compute units (SMs, CUs) the device showed: fewer than its model's in a partition; 0 if unknown


@dataclass(frozen=True)
class BenchResult:
    """The perf stage: per-call timings of the file (and of the reference), per-kernel time, the speedup."""

    ok: bool
    stage: Stage
    backend: Backend | None
    file: str
    message: str
    calls: tuple[CallTiming, ...] = ()
    reference_calls: tuple[CallTiming, ...] = ()
    kernel_ms: dict[str, float] = field(default_factory=dict)
    speedup: Speedup | None = None
    peaks: Peaks | None = None
    check: CheckResult | None = None
    reference: str | None = None
    device: str | None = None
    duration_s: float = 0.0
    peaks_s: float = 0.0  # of it, measuring the device's peaks (its first timing on a device with none cached)
    diagnostics: tuple[Diagnostic, ...] = ()
    isolation: str | None = None  # as in CheckResult
    alone_s: float = 0.0  # how long the timing had the device alone (``device_share``)
    # as the job reported them (informational): seconds of its preparing the timers and of its rounds, once granted
    phases_s: dict[str, float] = field(default_factory=dict)
    helpers: tuple[str, ...] = ()  # captured calls left untimed: they launch no Triton kernel (``calls_to_time``)

    @property
    def total_ms(self) -> float | None:
        return sum(c.median_ms for c in self.calls) if self.calls else None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["total_ms"] = self.total_ms
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchResult:
        return _from_dict(cls, {k: v for k, v in data.items() if k != "total_ms"})


@dataclass(frozen=True)
class CallCost:
    """One captured call against the device's roofline: bytes it moves (its tensors, each once), FLOPs where declared
    (`flops_<wrapper>`, a benchmark, Triton's `launch_metadata`), its time, and where that puts it."""

    signature: str
    bytes_moved: int
    flops: int | None
    flops_from: str | None
    ms: float | None
    pct_peak_bw: float | None
    pct_peak_flops: float | None
    bound: str  # "memory", "compute", "latency" or "unknown" (not timed)
    why: str


@dataclass(frozen=True)
class ScreenedVariant:
    """One variant of a screening. `status`: ok (ran, matched the reference's outputs, timed if a GPU is there),
    wrong (outputs differ), failed (raised), skipped (the device cannot run the configuration, or the compiler refuses
    it), same (launches the reference's very kernels), not run / not timed (out of time). `screen_ms`: the median
    of its short timings, Σ over the calls: for ranking only, never a claim. `baseline_ms`: the reference's median
    over the samples it took in the same rungs (None: the screening's `reference_ms`)."""

    label: str
    status: str
    message: str = ""
    screen_ms: float | None = None
    rung: int = 0
    kernels: tuple[CompiledKernelFacts, ...] = ()
    baseline_ms: float | None = None

    @property
    def correct(self) -> bool:
        return self.status in ("ok", "same")


@dataclass(frozen=True)
class ScreenResult:
    """A screening job's verdict: each variant (in the order given) against the reference, the reference's short
    timing and compile facts, and its calls on the roofline. `timed` is False on Triton's CPU interpreter (correctness
    only) or where the timing could not be done (`message` says why)."""

    ok: bool
    message: str
    backend: Backend | None
    device: str | None
    timed: bool
    reference_ms: float | None = None
    variants: tuple[ScreenedVariant, ...] = ()
    reference_kernels: tuple[CompiledKernelFacts, ...] = ()
    calls: tuple[CallCost, ...] = ()
    compile_note: str = ""
    duration_s: float = 0.0

    def ratio_of(self, variant: ScreenedVariant) -> float | None:
        """A variant's screen time over the reference's in the rungs it was timed in (ranking only): a variant
        dropped at the first rung is not compared with the reference's later rungs, where the device may run at
        another pace."""
        baseline = variant.baseline_ms or self.reference_ms
        return variant.screen_ms / baseline if variant.screen_ms and baseline else None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScreenResult:
        return _from_dict(cls, data)


T = TypeVar("T")


def _from_dict(cls: type[T], data: dict[str, Any]) -> T:
    """Rebuild a (nested, frozen) dataclass from `asdict` output."""
    hints = get_type_hints(cls)
    kwargs = {}
    for f in fields(cls):  # type: ignore[arg-type]
        if f.name in data:
            kwargs[f.name] = _convert(hints[f.name], data[f.name])
    return cls(**kwargs)


def _convert(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = get_origin(tp)
    if is_dataclass(tp):
        return _from_dict(tp, value)  # type: ignore[arg-type]
    if origin is tuple:
        (item, *_rest) = get_args(tp)
        return tuple(_convert(item, v) for v in value)
    if origin is not None and type(None) in get_args(tp):  # Optional[X]
        inner = next(a for a in get_args(tp) if a is not type(None))
        return _convert(inner, value)
    return value
