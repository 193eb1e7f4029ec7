"""The launch-configuration search on a simulated ROCm device (the runtime facts an MI250, MI300X or MI355X reports):
autotune lists that carry ROCm's compile options, the values those options may take, the LDS that AMD's pipeliner
fills, its default stages and 64-lane wavefronts (pure source analysis, and one screen on the CPU interpreter)."""

import asyncio
import textwrap
from pathlib import Path

import pytest
import torch
from test_launch_search import Scripted

from geak.agent.tuning.autotune_configs import find_autotune_sites
from geak.agent.tuning.definition_options import find_definition_sites, set_at_definition
from geak.agent.tuning.launch_params import apply_params, find_tunable_params
from geak.agent.tuning.launch_search import search_launch_configs
from geak.agent.tuning.launch_space import AMD_MATMUL, ELEMENT_BYTES, Space, Variant
from geak.evaluator.api import EvalOptions, Evaluator
from geak.evaluator.triton_file import parse_triton_file

FIXTURES = Path(__file__).parent / "fixtures"
AUTOTUNED = FIXTURES / "amd_autotuned_add.py"  # configs with waves_per_eu, kpack and matrix_instr_nonkdim
ROCM = Path(__file__).resolve().parents[2] / "shared" / "suites" / "rocm" / "ROCm_v1"
needs_suites = pytest.mark.skipif(not ROCM.is_dir(), reason="the suites are not at ../shared/suites")
MI250 = {"backend": "rocm", "device": "AMD Instinct MI250X", "arch": "gfx90a:sramecc+:xnack-"}
MI300X = {"backend": "rocm", "device": "AMD Instinct MI300X", "arch": "gfx942:sramecc+:xnack-"}
MI355X = {"backend": "rocm", "device": "AMD Instinct MI355X", "arch": "gfx950:sramecc+:xnack-"}
VALID = {"waves_per_eu": {0, 1, 2, 3, 4}, "matrix_instr_nonkdim": {0, 16, 32}, "kpack": {1, 2}}
# the ROCm benchmark's files whose autotune configs or launches set ROCm's compile options
WITH_ROCM_OPTIONS = ("gemm.py", "layernorm.py", "multreduce_matmul_dot_kernel.py", "rmsnorm_bwd.py", "rmsnorm_fwd.py",
                     "softmax.py", "test_chained_dot_fp8.py", "triton_multreduce_matmul_kernel.py")  # fmt: skip

MATMUL = textwrap.dedent(
    """\
    import triton
    import triton.language as tl


    @triton.jit
    def matmul_kernel(a, b, c, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, K, BLOCK_K):
            acc += tl.dot(tl.load(a + k), tl.load(b + k))
        tl.store(c, acc)


    def matmul(a, b, c, M, N, K):
        matmul_kernel[(1,)](a, b, c, M, N, K, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=4)
    """
)


def config_lines(source: str) -> list[str]:
    return [line.strip() for line in source.splitlines() if "Config(" in line]


def rocm_values(space: Space, variant: Variant) -> dict[str, int]:
    (group,) = space.groups
    return {group.knob(k).name: v for k, v in variant.values(group.name).items() if group.knob(k).name in VALID}


def test_an_autotune_list_with_rocm_options_keeps_its_meta_parameters_on_the_interpreter():
    source = AUTOTUNED.read_text()
    space = Space(source, "interpreter")
    (group,) = space.groups
    assert [k.name for k in group.knobs] == ["BLOCK", "num_warps"]  # the interpreter ignores ROCm's options
    variants = space.first_round(6)
    assert len(variants) == 6
    for variant in variants:
        (site,) = find_autotune_sites(space.render(variant), "interpreter")
        (config,) = site.known
        block = variant.values(group.name)["BLOCK"]
        assert dict(config.meta) == {"BLOCK": block, "waves_per_eu": 2, "kpack": 2, "matrix_instr_nonkdim": 16}


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is visible (the fixture's tensors would be on it)")
def test_the_interpreter_runs_the_variants_of_an_autotune_list_with_rocm_options():
    source = AUTOTUNED.read_text()
    space = Space(source, "interpreter")
    rendered = [space.render(v) for v in [*space.first_round(3), *space.own_configs()]]

    async def go():
        async with Evaluator(EvalOptions(backend="interpreter", timeout_s=180, spares=0)) as ev:
            return await ev.screen(AUTOTUNED, rendered, deadline_s=120)

    result = asyncio.run(go())
    assert result.ok, result.message
    assert [v.status for v in result.variants] == ["ok"] * 5, [v.message for v in result.variants]


def test_on_rocm_its_options_vary_over_valid_values_only_and_only_where_they_act():
    source = AUTOTUNED.read_text()
    space = Space(source, MI300X)
    (group,) = space.groups
    knobs = {k.name: k for k in group.knobs}
    assert set(knobs) == {"BLOCK", "num_warps", "waves_per_eu"}  # kpack and the MFMA size shape a tl.dot: none here
    assert (knobs["waves_per_eu"].current, knobs["waves_per_eu"].choices) == (2, (0, 1, 2, 3, 4))
    waves = {rocm_values(space, v)["waves_per_eu"] for v in space.first_round(200)}
    assert waves == VALID["waves_per_eu"]  # 0, the compiler's own occupancy, among them
    own = space.own_configs()
    # the second config omits kpack: Triton's default, not the first config's, so each is itself
    assert [space.own_index(v) for v in own] == [0, 1]
    assert "'waves_per_eu': 0" in config_lines(space.render(own[1]))[0]


@needs_suites
def test_the_rocm_suites_autotune_lists_vary_their_rocm_options_over_valid_values():
    source = (ROCM / "gemm.py").read_text()
    for device, options in (
        (MI300X, set(VALID)),
        (MI250, set(VALID)),
        (MI355X, {"waves_per_eu", "matrix_instr_nonkdim"}),
    ):
        space = Space(source, device)
        (group,) = space.groups
        tuned = {k.name: set(k.choices) for k in group.knobs if k.name in VALID}
        assert tuned == {o: VALID[o] for o in options}  # gfx950 overwrites kpack with 1: no knob there
        for variant in space.first_round(48):
            values = rocm_values(space, variant)
            assert all(values[o] in VALID[o] for o in values)
            (site,) = find_autotune_sites(space.render(variant), device)
            (config,) = site.known
            assert {"BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M"} <= dict(config.meta).keys()


@needs_suites
def test_no_rocm_suite_file_is_searched_with_a_config_that_drops_a_meta_parameter():
    for name in WITH_ROCM_OPTIONS:
        source = (ROCM / name).read_text()
        for device in (MI300X, "interpreter"):
            space = Space(source, device)
            for group in space.groups:
                for knob in group.knobs:
                    if knob.name in VALID:
                        assert set(knob.choices) <= VALID[knob.name] | {knob.current}, (name, knob)
                if group.autotune is None:
                    continue
                written = {k for config in group.autotune.known for k, _ in config.meta} - set(VALID)
                for variant in space.first_round(8):
                    (site,) = [
                        s for s in find_autotune_sites(space.render(variant), device) if s.kernel == group.kernel
                    ]
                    assert written <= {k for k, _ in site.known[0].meta}, (name, device)


def test_amds_presets_fit_its_lds_as_its_pipeliner_fills_it():
    presets = {(m, n, k, s, w) for m, n, k, s, w in AMD_MATMUL}
    space = Space(MATMUL, MI300X)
    (group,) = space.groups
    tried = set()
    for variant in space.first_round(400):
        values = {group.knob(k).name: v for k, v in variant.values(group.name).items()}
        shape = (values["BLOCK_M"], values["BLOCK_N"], values["BLOCK_K"], values["num_stages"], values["num_warps"])
        buffers = max(1, values["num_stages"] - 1)  # gfx942 streams through registers: stages - 1 copies in LDS
        tiles = (values["BLOCK_M"] + values["BLOCK_N"]) * values["BLOCK_K"] * ELEMENT_BYTES
        assert tiles * buffers <= 64 * 1024
        tried.add(shape)
    assert presets <= tried  # the 256-wide ones among them: one 64 KB buffer at two stages
    # its own 128x128x64 tiles are 32 KB a copy: gfx942 keeps stages - 1 copies in 64 KB, gfx950 one more (it copies
    # asynchronously) in 160 KB, an H100 one a stage in 227 KB
    for device, stages in (
        (MI300X, {1, 2, 3}),
        (MI250, {1, 2, 3}),
        (MI355X, {1, 2, 3, 4, 5}),
        ("cuda", {1, 2, 3, 4, 5}),
    ):
        space = Space(MATMUL, device)
        (group,) = space.groups
        reached = set()
        for variant in space.first_round(400):
            values = {group.knob(k).name: v for k, v in variant.values(group.name).items()}
            if (values["BLOCK_M"], values["BLOCK_N"], values["BLOCK_K"]) == (128, 128, 64):
                reached.add(values["num_stages"])
        assert reached == stages, device


def test_an_omitted_num_stages_is_amds_default_of_two():
    launch = next(p for p in find_tunable_params(MATMUL, MI300X) if p.name == "num_stages")
    assert (launch.current, launch.default) == (2, True)
    assert apply_params(MATMUL, {launch.key: 2}, MI300X) == MATMUL  # Triton's default on AMD: nothing written
    three = apply_params(MATMUL, {launch.key: 3}, MI300X)
    assert "num_warps=4, num_stages=3)" in three
    nvidia = next(p for p in find_tunable_params(MATMUL, "cuda") if p.name == "num_stages")
    assert nvidia.current == 3 and apply_params(MATMUL, {nvidia.key: 3}, "cuda") == MATMUL


def test_a_kernel_launched_by_the_test_gets_amds_default_stages_at_its_definition():
    source = (FIXTURES / "rocm_launched_by_test.py").read_text()
    fixed = parse_triton_file(source).test_line_numbers
    (site,) = find_definition_sites(source, fixed, MI300X)
    assert site.options == ("num_warps", "num_stages", "waves_per_eu", "matrix_instr_nonkdim", "kpack")
    assert set_at_definition(source, site, {"num_stages": 2}, MI300X) == source
    three = set_at_definition(source, site, {"num_stages": 3}, MI300X)
    assert '@triton.heuristics({"num_stages": lambda args: 3})' in three
    space = Space(source, MI300X)
    (group,) = space.groups
    assert {k.name: k.current for k in group.knobs} == {"num_warps": 4, "num_stages": 2, "waves_per_eu": 0}


def test_rocm_options_a_launch_omits_are_inserted_and_the_mfma_ones_only_for_a_dot():
    space = Space(MATMUL, MI300X)
    (group,) = space.groups
    knobs = {k.name: k for k in group.knobs}
    defaults = {"waves_per_eu": 0, "matrix_instr_nonkdim": 0, "kpack": 1}
    assert {o: (knobs[o].current, set(knobs[o].choices)) for o in VALID} == {o: (defaults[o], VALID[o]) for o in VALID}
    values = {k.key: k.current for k in group.knobs} | {knobs["waves_per_eu"].key: 2, knobs["kpack"].key: 2}
    rendered = space.render(Variant(((group.name, tuple(values.items())),)))
    assert "num_warps=4, waves_per_eu=2, kpack=2)" in rendered
    assert {p.name: p.current for p in find_tunable_params(rendered, MI300X)}["waves_per_eu"] == 2
    add = Space((FIXTURES / "add_native.py").read_text(), MI300X)
    assert {k.name for g in add.groups for k in g.knobs} == {"BLOCK", "num_warps", "waves_per_eu"}
    assert not [p for p in find_tunable_params(MATMUL, "cuda") if p.name in VALID]
    assert not [p for p in find_tunable_params(MATMUL, "interpreter") if p.name in VALID]


def test_one_dimensional_tiles_are_spread_over_64_lane_wavefronts_on_cdna():
    source = (FIXTURES / "add_native.py").read_text()
    for device, lanes in ((MI300X, 64), ("cuda", 32)):
        space = Space(source, device)
        (group,) = space.groups
        per_thread = []
        for variant in space.first_round(200):
            values = {group.knob(k).name: v for k, v in variant.values(group.name).items()}
            per_thread.append(values["BLOCK"] / (values["num_warps"] * lanes))
        assert all(1 <= p <= 128 for p in per_thread) and min(per_thread) == 1, device


def test_the_search_takes_the_runtimes_facts_and_screens_only_valid_rocm_values():
    screened = Scripted(time_of=lambda values: 1.0, timing=False)
    source = AUTOTUNED.read_text()
    result = asyncio.run(search_launch_configs(source, screened, budget_s=60, device_backend=MI355X))
    assert result.knobs == 3  # BLOCK, num_warps, waves_per_eu
    configs = [config_lines(variant)[0] for screen in screened.screens for variant in screen]
    assert configs and all("'BLOCK': " in line for line in configs)
    waves = {int(line.split("'waves_per_eu': ")[1].split(",")[0]) for line in configs}
    assert waves <= VALID["waves_per_eu"] and len(waves) > 1
