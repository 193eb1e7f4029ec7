"""The space of launch configurations a file can take, and which of them to try first.

The knobs (``launch_params``, ``autotune_configs``, ``definition_options``) fall into groups, one per launch
configuration: a launch site (with the table row or branch that sets it), an autotuned kernel's config list, or the
options a kernel's definition sets where all its launches are in the test code and omit them. A ``Variant`` sets some
groups to new values; it renders as the source screened and proposed alike: an autotuned kernel is pinned to the new
config (its list replaced by that config alone), so the confirmation times what the screen timed. Proposing the
config added to the list would leave the autotuner to choose, and it may choose otherwise: what is confirmed would not
be what won the screening.

Which configurations, in order:
1. device presets for matmul-like kernels (``tl.dot`` with tiles named …M, …N, …K): Triton's own tuned tile shapes
   for the device (NVIDIA: deep pipelines; AMD: one or two stages), within the shared memory of a block;
2. the neighbours of the file's own configuration, one knob one step away;
3. tiles × warps (× stages where the kernel loops) around it, then random draws of the whole group (seeded),
each ordered by what the diagnosis says limits the kernel (``Focus``): memory- or latency-bound calls want other tile
widths and warps, compute-bound ones deeper pipelines and other tiles, spilling kernels smaller tiles and fewer
stages. Only values the kernel accepts are tried: power-of-two tiles of at least 16, warps up to 16 (32 where the file
uses it), stages only where the kernel has a loop to pipeline; on ROCm its compile options over the values the device
accepts (``device_target``), the MFMA ones (``matrix_instr_nonkdim``, ``kpack``) only for kernels with a ``tl.dot``.
The shared-memory bound and the lanes a 1-D tile is spread over are the device's (``DeviceTarget``).

An autotuned kernel's own configs are screened too, each pinned (``own_configs``): the best of them is what the
original's list reaches at best, the bar a new configuration must clear. Its autotuner's kept choice need not be that
best (an autotuner that times one launch of a µs-scale kernel measures host time), and the bench's original tunes
afresh, so beating the kept choice in screening is not enough.
"""

from __future__ import annotations

import ast
import itertools
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from geak.evaluator import CallCost, CompiledKernelFacts, TritonFileError, is_kernel_def, parse_triton_file
from geak.evaluator import parse_python as parse

from .autotune_configs import AutotuneSite, LaunchConfig, find_autotune_sites, pin
from .definition_options import DefinitionSite, find_definition_sites, set_at_definition
from .device_target import ROCM_DEFAULTS, ROCM_DOT_OPTIONS, ROCM_OPTIONS, DeviceTarget
from .launch_params import NUM_STAGES_CHOICES, NUM_WARPS_CHOICES, TunableParam, apply_params, find_tunable_params
from .review_notes import ParamChange

Focus = Literal["memory", "compute", "latency", "spills", "unknown"]
Role = Literal["M", "N", "K", "tile", "warps", "stages", "other"]

ELEMENT_BYTES = 2  # a tile's element size assumed for the shared-memory bound (fp16/bf16)
MAX_ELEMENTS_PER_THREAD = 128  # a 1-D tile spread thinner than this over its threads is kept; thicker spills
# (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps): Triton's matmul tutorial configs and Hopper-sized tiles
NVIDIA_MATMUL = (
    (128, 256, 64, 3, 8), (256, 128, 64, 3, 8), (128, 128, 64, 4, 8), (128, 128, 64, 3, 4), (128, 128, 32, 4, 4),
    (128, 64, 64, 4, 4), (64, 128, 64, 4, 4), (128, 64, 32, 4, 4), (64, 128, 32, 4, 4), (64, 256, 32, 4, 4),
    (64, 64, 64, 4, 4), (64, 64, 32, 5, 4), (128, 32, 32, 4, 4), (32, 64, 32, 5, 2), (64, 32, 32, 5, 2),
    (32, 32, 64, 4, 2), (16, 64, 64, 4, 4), (64, 16, 64, 4, 4),
)  # fmt: skip
AMD_MATMUL = (
    (256, 256, 64, 2, 8), (256, 128, 64, 2, 8), (128, 256, 64, 2, 8), (128, 128, 64, 2, 4), (128, 128, 32, 2, 4),
    (128, 64, 64, 2, 4), (64, 128, 64, 2, 4), (64, 64, 64, 2, 4), (64, 64, 32, 1, 4), (32, 32, 64, 2, 4),
)  # fmt: skip


@dataclass(frozen=True)
class Knob:
    """One dimension of a group: a launch parameter, or a meta-parameter / option of an autotuned kernel's config."""

    key: str  # the parameter's key, or the meta-parameter's name in a config
    name: str
    role: Role
    current: int
    choices: tuple[int, ...]


@dataclass(frozen=True)
class Group:
    """The knobs of one launch configuration."""

    name: str
    kernel: str
    knobs: tuple[Knob, ...]
    uses_dot: bool
    loops: bool
    autotune: AutotuneSite | None = None
    definition: DefinitionSite | None = None  # options set at the kernel's definition (``definition_options``)
    inert: frozenset[str] = frozenset()  # config keys that change nothing here: ROCm's options off ROCm, its MFMA ones
    # for a kernel without a tl.dot

    def knob(self, key: str) -> Knob:
        return next(k for k in self.knobs if k.key == key)


@dataclass(frozen=True)
class Variant:
    """New values for some groups: group -> ((knob key, value), ...). `origin` says how it was chosen."""

    changes: tuple[tuple[str, tuple[tuple[str, int], ...]], ...]
    origin: str = field(default="", compare=False)

    def values(self, group: str) -> dict[str, int]:
        return dict(next((v for g, v in self.changes if g == group), ()))

    def to_json(self) -> dict[str, dict[str, int]]:
        return {group: dict(values) for group, values in self.changes}

    @classmethod
    def from_json(cls, data: dict[str, dict[str, int]], origin: str = "") -> Variant:
        return cls(tuple((g, tuple(v.items())) for g, v in data.items()), origin)


@dataclass
class Space:
    """The launch configurations of `source` on `backend`: the device's runtime facts (the evaluator's ``runtime()``),
    a ``DeviceTarget``, or a backend's name alone ("cuda", "rocm" or "interpreter")."""

    source: str
    backend: DeviceTarget | Mapping[str, Any] | str | None = None
    kernel: str | None = None
    groups: list[Group] = field(default_factory=list)
    set_by_test: list[str] = field(default_factory=list)  # knobs on lines of the test section: never screened
    device: DeviceTarget = field(init=False)

    def __post_init__(self) -> None:
        self.device = DeviceTarget.of(self.backend)
        groups, in_test = _groups(self.source, self.device)
        self.groups = [g for g in groups if self.kernel in (None, g.kernel)]
        self.set_by_test = [where for kernel, where in in_test if self.kernel in (None, kernel)]

    @property
    def knob_count(self) -> int:
        return sum(len(g.knobs) for g in self.groups)

    def group(self, name: str) -> Group:
        return next(g for g in self.groups if g.name == name)

    def describe(self, variant: Variant) -> str:
        """What the variant changes, for a person: ``matmul_kernel: BLOCK_SIZE_M 128→64, num_stages 1→4``, or
        ``bmm_kernel: its own config 2 of 9 pinned (BLOCK_M=64, num_warps=4, num_stages=2)``."""
        own = self.own_index(variant)
        if own is not None:
            group = self.group(variant.changes[0][0])
            assert group.autotune is not None
            known = group.autotune.known
            return f"{group.kernel}: its own config {own + 1} of {len(known)} pinned ({known[own].describe()})"
        parts = []
        for name, values in variant.changes:
            group = self.group(name)
            changed = [
                f"{group.knob(k).name} {group.knob(k).current}→{v}" for k, v in values if group.knob(k).current != v
            ]
            where = [_row(name)] if _row(name) else []
            if group.definition is not None or sum(g.kernel == group.kernel for g in self.groups) > 1:
                where.insert(0, _site(name, group.kernel))  # at its definition, or which of its configurations
            label = f"{group.kernel} ({', '.join(where)})" if where else group.kernel
            parts.append(f"{label}: {', '.join(changed) or 'unchanged'}")
        return "; ".join(parts)

    def param_changes(self, variant: Variant) -> list[ParamChange]:
        """The kernel parameters (and config meta-parameters) the variant sets to other values than the source's."""
        changes = []
        for name, values in variant.changes:
            group = self.group(name)
            for key, value in values:
                knob = group.knob(key)
                if knob.current != value:
                    changes.append(ParamChange(group.kernel, knob.name, knob.current, value))
        return changes

    def set_at_definition(self, variant: Variant) -> list[tuple[str, list[str]]]:
        """The kernels (with the options) whose definition the variant makes set an option for every launch."""
        found = []
        for name, values in variant.changes:
            group = self.group(name)
            if group.definition is not None and (changed := [k for k, v in values if group.knob(k).current != v]):
                found.append((group.kernel, changed))
        return found

    def pinned(self, variant: Variant) -> list[tuple[str, int]]:
        """The autotuned kernels (with their counts of literal configs, two or more) the variant pins to one config."""
        sites = [(g.kernel, g.autotune) for g in (self.group(name) for name, _ in variant.changes)]
        return [(kernel, len(site.known)) for kernel, site in sites if site is not None and len(site.known) > 1]

    def render(self, variant: Variant) -> str:
        """The source of `variant` (screened, and proposed if it wins). ValueError where the rewrite fails."""
        params: dict[str, int] = {}
        autotuned: list[tuple[Group, LaunchConfig]] = []
        defined: list[tuple[DefinitionSite, dict[str, int]]] = []
        for name, values in variant.changes:
            group = self.group(name)
            if group.definition is not None:
                defined.append((group.definition, dict(values)))
            elif group.autotune is None:
                params |= dict(values)
            else:
                autotuned.append((group, _config(group, dict(values))))
        source = apply_params(self.source, params, self.device) if params else self.source
        for site, values in sorted(defined, key=lambda d: -d[0].line):  # from the last: each adds a line above it
            source = set_at_definition(source, site, values, self.device)
        for group, config in autotuned:  # one at a time: each rewrite moves the others' positions
            source = pin(source, _site_of(source, group, self.device), config)
        return source

    # ------------------------------------------------------------------------------------------ choosing

    def first_round(self, limit: int, focus: Focus = "unknown", seed: int = 0) -> list[Variant]:
        """Up to `limit` single-group variants, the most promising first (see the module's docstring), shared out
        over the groups."""
        per_group = [self._candidates(g, focus, seed) for g in self.groups]
        return _interleave(per_group, limit)

    def own_configs(self) -> list[Variant]:
        """Each autotuned kernel's own literal configs, all of them, pinned one at a time (taking the kernels in
        turn), where it has two or more: the best its list can reach, against which a new configuration is judged
        (the kept choice of its autotuner may be slower)."""
        per_group = []
        for group in self.groups:
            if group.autotune is None or len(group.autotune.known) < 2:
                continue
            found = []
            for config in group.autotune.known:
                values = _values_of(group, config)
                if values is not None:
                    found.append(Variant(((group.name, tuple(values.items())),), "own config"))
            per_group.append(found)
        return _interleave(per_group, sum(len(found) for found in per_group))

    def own_index(self, variant: Variant) -> int | None:
        """Which of its kernel's own configs `variant` pins (0-based), or None where it is a new configuration."""
        if len(variant.changes) != 1:
            return None
        name, values = variant.changes[0]
        return _own_index(self.group(name), dict(values))

    def refine(
        self, leaders: list[Variant], tried: set[Variant], limit: int, focus: Focus = "unknown"
    ) -> list[Variant]:
        """Around the leaders of a screening: each one's neighbours, and the leaders of different groups combined."""
        found: list[Variant] = []
        best_per_group: dict[str, Variant] = {}
        for leader in leaders:
            for name, _ in leader.changes:
                best_per_group.setdefault(name, leader)
        if len(best_per_group) > 1:
            merged = tuple((g, v.values(g)) for g, v in best_per_group.items())
            found.append(Variant(tuple((g, tuple(vals.items())) for g, vals in merged), "combined"))
        for leader in leaders:
            for name, values in leader.changes:
                group = self.group(name)
                around = dict(values)
                for step in _ordered(_steps(group, around), group, focus):
                    found.append(Variant(((name, tuple({**around, **step}.items())),), "refined"))
        unique = [v for v in dict.fromkeys(found) if v not in tried and not self._is_current(v)]
        return unique[:limit]

    def _is_current(self, variant: Variant) -> bool:
        return all(self.group(g).knob(k).current == v for g, values in variant.changes for k, v in values)

    def _candidates(self, group: Group, focus: Focus, seed: int) -> list[Variant]:
        current = {k.key: k.current for k in group.knobs}
        found: list[dict[str, int]] = []
        if group.uses_dot:
            found += _presets(group, self.device)
        found += _ordered(_steps(group, current), group, focus)
        found += _ordered(_grid(group), group, focus)
        found += _draws(group, seed)
        variants = []
        for values in found:
            full = {**current, **values}
            if full != current and _accepted(group, full, self.device) and _own_index(group, full) is None:
                variants.append(Variant(((group.name, tuple(full.items())),), "first round"))
        return list(dict.fromkeys(variants))


def focus_of(calls: Sequence[CallCost], kernels: Sequence[CompiledKernelFacts]) -> Focus:
    """What limits the kernel, for choosing knobs: spilled registers first, else where its slowest call sits on the
    roofline."""
    if any(k.n_spills for k in kernels):
        return "spills"
    timed = [c for c in calls if c.ms]
    if not timed:
        return "unknown"
    bound = max(timed, key=lambda c: c.ms or 0.0).bound
    return bound if bound in ("memory", "compute", "latency") else "unknown"  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------------- groups


def _groups(source: str, device: DeviceTarget) -> tuple[list[Group], list[tuple[str, str]]]:
    """The launch configurations of `source`, and (kernel, where) of each knob on a line of its test section: a check
    composes every candidate with the original's test section, so a change there would screen the original again
    (the ROCm benchmark's files launch their kernels from wrappers after the separator: 24 of its 31 files set every
    launch configuration there)."""
    traits = _kernel_traits(source)
    in_test = _test_lines(source)
    definitions = find_definition_sites(source, in_test, device)
    at_definition = {(site.kernel, option) for site in definitions for option in site.options}
    set_by_test: list[tuple[str, str]] = []
    by_group: dict[str, list[TunableParam]] = {}
    for param in find_tunable_params(source, device):
        if param.kind in ROCM_DOT_OPTIONS and not traits.get(param.kernel, (False, True))[0]:
            continue  # an MFMA option of a kernel without a tl.dot changes nothing
        if param.line in in_test:
            if not (param.default and (param.kernel, param.name) in at_definition):
                set_by_test.append((param.kernel, f"{param.kernel}: {param.name} (line {param.line})"))
        else:
            by_group.setdefault(param.group, []).append(param)
    groups = []
    for name, params in by_group.items():
        kernel = params[0].kernel
        uses_dot, loops = traits.get(kernel, (False, True))
        knobs = tuple(
            Knob(p.key, p.name, _role(p.name, p.kind), p.current, p.choices)
            for p in params
            if _wanted(p.kind, uses_dot, loops)
        )
        if knobs:
            groups.append(Group(name, kernel, knobs, uses_dot, loops))
    for site in definitions:
        uses_dot, loops = traits.get(site.kernel, (False, True))
        knobs = tuple(_definition_knobs(site, uses_dot, loops, device))
        if knobs:
            groups.append(Group(site.group, site.kernel, knobs, uses_dot, loops, definition=site))
    for site in find_autotune_sites(source, device):
        if site.line in in_test:
            set_by_test.append((site.kernel, f"{site.kernel}: its autotune configs (line {site.line})"))
            continue
        uses_dot, loops = traits.get(site.kernel, (False, True))
        knobs = tuple(_autotune_knobs(site, uses_dot, loops, device))
        if knobs:
            inert = frozenset(ROCM_OPTIONS if not device.rocm else () if uses_dot else ROCM_DOT_OPTIONS)
            groups.append(Group(site.group, site.kernel, knobs, uses_dot, loops, site, inert=inert))
    return groups, set_by_test


def _test_lines(source: str) -> frozenset[int]:
    """The lines of `source` in its test section (``TritonFile.test_line_numbers``); none for kernel code alone."""
    try:
        return parse_triton_file(source).test_line_numbers
    except TritonFileError:
        return frozenset()


def _kernel_traits(source: str) -> dict[str, tuple[bool, bool]]:
    """kernel -> (uses tl.dot, has a loop to pipeline)."""
    traits = {}
    for node in ast.walk(parse(source)):
        if is_kernel_def(node):
            assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            calls = {ast.unparse(n.func).split(".")[-1] for n in ast.walk(node) if isinstance(n, ast.Call)}
            loops = any(isinstance(n, ast.For | ast.While) for n in ast.walk(node))
            traits[node.name] = ("dot" in calls, loops)
    return traits


def _role(name: str, kind: str) -> Role:
    if kind == "num_warps":
        return "warps"
    if kind == "num_stages":
        return "stages"
    if kind != "constexpr":
        return "other"
    upper = name.upper()
    if "GROUP" in upper or "SPLIT" in upper:  # a swizzle or a split of the reduction, not a tile
        return "other"
    for axis in ("M", "N", "K"):
        if upper.endswith(f"_{axis}") or upper in (f"B{axis}", f"BLOCK{axis}", f"TILE{axis}", f"BLK{axis}"):
            return axis  # type: ignore[return-value]
    return "tile"


def _wanted(kind: str, uses_dot: bool, loops: bool) -> bool:
    """Whether an option can change the kernel: stages where it loops, MFMA options where it has a ``tl.dot``."""
    return (loops or kind != "num_stages") and (uses_dot or kind not in ROCM_DOT_OPTIONS)


def _rocm_knob(option: str, current: int, device: DeviceTarget) -> Knob | None:
    """A knob over the values of one of ROCm's compile options the device accepts (and the current one)."""
    choices = device.rocm_choices(option)
    return Knob(option, option, "other", current, tuple(sorted({*choices, current}))) if choices else None


def _autotune_knobs(site: AutotuneSite, uses_dot: bool, loops: bool, device: DeviceTarget) -> list[Knob]:
    """The knobs of an autotuned kernel: each meta-parameter over the powers of two around the values its configs
    use, warps, (where it loops) stages and on ROCm its compile options; `current` is the first config's. None where
    the first config does not set every meta-parameter the configs set (a config rendered from it would drop one)."""
    first = site.known[0] if site.known else LaunchConfig(())
    written = dict(first.meta)
    if any(key not in written for key in site.keys if key not in ROCM_OPTIONS):
        return []
    knobs = []
    for key in site.keys:
        if key in ROCM_OPTIONS:
            continue
        values = [v for c in site.known for k, v in c.meta if k == key]
        low, high = max(1, min(values) // 4), min(65536, max(values) * 4)
        choices = tuple(v for v in (1 << i for i in range(17)) if low <= v <= high)
        current = written[key]
        if current in choices and len(choices) > 1:
            knobs.append(Knob(key, key, _role(key, "constexpr"), current, choices))
    knobs.append(
        Knob("num_warps", "num_warps", "warps", first.num_warps, tuple(sorted({*NUM_WARPS_CHOICES, first.num_warps})))
    )
    if loops:
        knobs.append(Knob("num_stages", "num_stages", "stages", first.num_stages,
                          tuple(sorted({*NUM_STAGES_CHOICES, first.num_stages}))))  # fmt: skip
    for option in ROCM_OPTIONS:
        knob = _rocm_knob(option, written.get(option, ROCM_DEFAULTS[option]), device)
        if knob is not None and _wanted(option, uses_dot, loops):
            knobs.append(knob)
    return knobs


def _definition_knobs(site: DefinitionSite, uses_dot: bool, loops: bool, device: DeviceTarget) -> list[Knob]:
    """The options a kernel's definition may set, from Triton's defaults on the device: warps, stages where it loops,
    ROCm's compile options."""
    knobs = []
    for option in site.options:
        current = device.option_default(option)
        if not _wanted(option, uses_dot, loops):
            continue
        if option == "num_warps":
            knobs.append(Knob(option, option, "warps", current, tuple(sorted({*NUM_WARPS_CHOICES, current}))))
        elif option == "num_stages":
            knobs.append(Knob(option, option, "stages", current, tuple(sorted({*NUM_STAGES_CHOICES, current}))))
        elif (knob := _rocm_knob(option, current, device)) is not None:
            knobs.append(knob)
    return knobs


def _config(group: Group, values: dict[str, int]) -> LaunchConfig:
    """The first config with `values` set: its meta-parameters in its order, then a ROCm option it omits where set to
    other than Triton's default."""
    assert group.autotune is not None
    first = group.autotune.known[0] if group.autotune.known else LaunchConfig(())
    meta = [(k, values.get(k, v)) for k, v in first.meta]
    written = dict(first.meta)
    meta += [(k, values[k]) for k in ROCM_OPTIONS if k in values and k not in written and values[k] != ROCM_DEFAULTS[k]]
    return LaunchConfig(tuple(meta), values.get("num_warps", first.num_warps),
                        values.get("num_stages", first.num_stages))  # fmt: skip


def _values_of(group: Group, config: LaunchConfig) -> dict[str, int] | None:
    """The knob values that render as `config`, or None where its knobs cannot say it (a meta-parameter or an option
    they do not cover)."""
    meta = {**ROCM_DEFAULTS, **dict(config.meta)}  # a ROCm option a config omits is Triton's default
    options = {"num_warps": config.num_warps, "num_stages": config.num_stages}
    values = {k.key: options[k.key] if k.key in options else meta.get(k.key, k.current) for k in group.knobs}
    return values if _same(_config(group, values), config, group.inert) else None


def _own_index(group: Group, values: dict[str, int]) -> int | None:
    """Which of an autotuned group's own configs `values` render as (screened as ``own_configs``), or None."""
    if group.autotune is None:
        return None
    config = _config(group, values)
    return next((i for i, known in enumerate(group.autotune.known) if _same(known, config, group.inert)), None)


def _same(a: LaunchConfig, b: LaunchConfig, inert: frozenset[str]) -> bool:
    """The same config here, whatever the order its meta-parameters are written in, whether it writes a ROCm option
    at Triton's default or omits it, and whatever it sets for an `inert` key."""
    return (_meta(a, inert), a.num_warps, a.num_stages) == (_meta(b, inert), b.num_warps, b.num_stages)


def _meta(config: LaunchConfig, inert: frozenset[str]) -> dict[str, int]:
    return {k: v for k, v in config.meta if k not in inert and not (k in ROCM_DEFAULTS and v == ROCM_DEFAULTS[k])}


def _site_of(source: str, group: Group, device: DeviceTarget) -> AutotuneSite:
    return next(s for s in find_autotune_sites(source, device) if s.kernel == group.kernel)


def _row(group: str) -> str:
    return group[group.index("[") + 1 : -1] if group.endswith("]") and "[" in group else ""


def _site(group: str, kernel: str) -> str:
    """Where a group's configuration is set, for a person: ``launch L400``, ``heuristics L145``, ``autotune L227``."""
    site = group.removeprefix(kernel).split("[")[0]
    how, _, line = site.lstrip(":").rpartition("@")
    return f"{how or 'launch'} {line}"


# ---------------------------------------------------------------------------------------------- candidates


def _presets(group: Group, device: DeviceTarget) -> list[dict[str, int]]:
    axes = {k.role: k for k in group.knobs if k.role in ("M", "N", "K")}
    if len(axes) < 2:
        return []
    warps = next((k for k in group.knobs if k.role == "warps"), None)
    stages = next((k for k in group.knobs if k.role == "stages"), None)
    found = []
    for m, n, k, s, w in AMD_MATMUL if device.rocm else NVIDIA_MATMUL:
        values = {axes[a].key: v for a, v in (("M", m), ("N", n), ("K", k)) if a in axes}
        if any(v not in axes[a].choices for a, v in (("M", m), ("N", n), ("K", k)) if a in axes):
            continue
        if warps is not None and w in warps.choices:
            values[warps.key] = w
        if stages is not None and s in stages.choices:
            values[stages.key] = s
        found.append(values)
    return found


def _steps(group: Group, around: dict[str, int]) -> list[dict[str, int]]:
    """Each knob one step up and one step down from `around`."""
    found = []
    for knob in group.knobs:
        index = knob.choices.index(around[knob.key]) if around[knob.key] in knob.choices else None
        if index is None:
            continue
        for step in (1, -1):
            if 0 <= index + step < len(knob.choices):
                found.append({knob.key: knob.choices[index + step]})
    return found


def _grid(group: Group) -> list[dict[str, int]]:
    """Tiles × warps (× stages): every tile knob over its choices with every warp count, for groups of one or two
    tile knobs; stages varied with the current tiles."""
    tiles = [k for k in group.knobs if k.role in ("M", "N", "K", "tile")]
    warps = [k for k in group.knobs if k.role == "warps"]
    stages = [k for k in group.knobs if k.role == "stages"]
    found: list[dict[str, int]] = []
    if 1 <= len(tiles) <= 2:
        dims = [*tiles, *warps[:1]]
        for combo in itertools.product(*(k.choices for k in dims)):
            found.append(dict(zip((k.key for k in dims), combo, strict=True)))
    for knob in stages[:1]:
        for value in knob.choices:
            for w in warps[:1]:
                for warp in w.choices:
                    found.append({knob.key: value, w.key: warp})
    return found


def _draws(group: Group, seed: int, count: int = 64) -> list[dict[str, int]]:
    rng = random.Random(seed)
    return [{k.key: rng.choice(k.choices) for k in group.knobs} for _ in range(count)]


def _accepted(group: Group, values: dict[str, int], device: DeviceTarget) -> bool:
    """Values the kernel can take on the device: a matmul's tiles (as many copies as its pipeline keeps) within a
    block's shared memory; a 1-D tile neither thinner than a thread nor thicker than ``MAX_ELEMENTS_PER_THREAD`` per
    thread."""
    by_role = {k.role: values[k.key] for k in group.knobs}
    warps = by_role.get("warps", 4)
    if group.uses_dot and {"M", "N", "K"} <= by_role.keys():
        tiles = (by_role["M"] * by_role["K"] + by_role["K"] * by_role["N"]) * ELEMENT_BYTES
        return tiles * device.shared_buffers(by_role.get("stages", 2)) <= device.shared_memory
    tiles = [values[k.key] for k in group.knobs if k.role == "tile"]
    if len(tiles) == 1 and not group.uses_dot:
        per_thread = tiles[0] / (warps * device.warp_size)
        return 1 <= per_thread <= MAX_ELEMENTS_PER_THREAD
    return True


def _ordered(candidates: list[dict[str, int]], group: Group, focus: Focus) -> list[dict[str, int]]:
    """`candidates` with those that change what the diagnosis points at first (stable otherwise)."""
    roles = {k.key: k.role for k in group.knobs}
    currents = {k.key: k.current for k in group.knobs}

    def weight(values: dict[str, int]) -> int:
        score = 0
        for key, value in values.items():
            role, up = roles[key], value > currents[key]
            tile = role in ("M", "N", "K", "tile")
            if focus == "spills":
                score += 2 if (tile or role == "stages") and not up else 0
            elif focus == "memory":
                score += 2 if tile or role == "warps" else 0
            elif focus == "compute":
                score += 2 if role == "stages" or tile else 0
            elif focus == "latency":
                score += 2 if (tile and not up) or (role == "warps" and up) or role == "stages" else 0
        return score

    return sorted(candidates, key=weight, reverse=True)


def _interleave(per_group: list[list[Variant]], limit: int) -> list[Variant]:
    """Round-robin over the groups, so that every launch configuration gets its share of the `limit`."""
    found: list[Variant] = []
    for batch in itertools.zip_longest(*per_group):
        found += [v for v in batch if v is not None and v not in found]
        if len(found) >= limit:
            break
    return found[:limit]
