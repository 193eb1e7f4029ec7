"""Launch configurations of real suite files: found wherever the file sets them, rewritten as minimal diffs whose
values parse back, and chosen in an order the diagnosis sets (pure source analysis: no kernel runs)."""

import difflib
import textwrap
from pathlib import Path

import pytest

from geak.agent.tuning.autotune_configs import LaunchConfig, find_autotune_sites, pin
from geak.agent.tuning.device_target import DeviceTarget
from geak.agent.tuning.launch_params import apply_params, find_tunable_params
from geak.agent.tuning.launch_space import ELEMENT_BYTES, Space, Variant, focus_of
from geak.evaluator.results import CallCost, CompiledKernelFacts

TB = Path(__file__).resolve().parents[2] / "shared" / "suites" / "tritonbench_revised" / "TritonBench_G_v1"
needs_suites = pytest.mark.skipif(not TB.is_dir(), reason="the suites are not at ../shared/suites")


def changed_lines(before: str, after: str) -> list[str]:
    return [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


@needs_suites
def test_a_table_row_per_dtype_is_its_own_launch_configuration():
    source = (TB / "triton_matmul.py").read_text()
    params = {p.key: p for p in find_tunable_params(source)}
    fp16 = {k: p for k, p in params.items() if "[torch.float16]" in k}
    assert {p.name for p in fp16.values()} == {
        "BLOCK_SIZE_M",
        "BLOCK_SIZE_N",
        "BLOCK_SIZE_K",
        "num_warps",
        "num_stages",
    }
    assert all(p.via == "table" and p.group == "matmul_kernel@L97[torch.float16]" for p in fp16.values())
    stages = fp16["matmul_kernel:num_stages[torch.float16]@L83"]
    assert stages.current == 1
    new = apply_params(source, {stages.key: 4, "matmul_kernel:BLOCK_SIZE_N[torch.float16]@L83": 128})
    row = 12 * " " + '"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": {}, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8, "num_stages": {},'
    assert changed_lines(source, new) == ["-" + row.format(256, 1), "+" + row.format(128, 4)]
    reparsed = {p.key: p.current for p in find_tunable_params(new)}
    assert reparsed[stages.key] == 4 and reparsed["matmul_kernel:BLOCK_SIZE_N[torch.float8_e4m3fn]@L80"] == 256


@needs_suites
def test_branches_and_returned_settings_are_knobs():
    attention = {p.key: p for p in find_tunable_params((TB / "context_attn_llama.py").read_text())}
    assert [(p.name, p.current, p.via) for p in attention.values() if p.name == "num_warps"] == [
        ("num_warps", 4, "branch"),
        ("num_warps", 8, "branch"),
    ]
    source = (TB / "fast_ce_loss.py").read_text()
    returned = [p for p in find_tunable_params(source) if p.via == "returned"]
    assert sorted(p.current for p in returned) == [4, 8, 16, 32]  # calculate_settings' num_warps, branch by branch
    eight = next(p for p in returned if p.current == 8)
    new = apply_params(source, {eight.key: 4})
    assert changed_lines(source, new) == [
        "-    elif BLOCK_SIZE >=  2048: num_warps = 8",
        "+    elif BLOCK_SIZE >=  2048: num_warps = 4",
    ]


@needs_suites
def test_autotune_pin_replaces_the_list_and_parses_back():
    source = (TB / "swiglu_fwd.py").read_text()
    (site,) = find_autotune_sites(source)
    assert site.keys == ("BLOCK_N",) and len(site.known) == 6
    config = LaunchConfig((("BLOCK_N", 4096),), num_warps=16, num_stages=2)
    pinned = pin(source, site, config)
    (after,) = find_autotune_sites(pinned)
    assert after.known == (config,)
    assert "triton.Config({'BLOCK_N': 4096}, num_warps=16, num_stages=2)" in pinned
    computed = (TB / "matmul_triton_autotune.py").read_text()
    (site,) = find_autotune_sites(computed)
    assert len(site.known) == 2  # the CUDA configs; the HIP one sets waves_per_eu, not a constexpr of the kernel
    new = pin(computed, site, LaunchConfig((("BLOCK_SIZE_M", 64), ("BLOCK_SIZE_N", 64), ("BLOCK_SIZE_K", 32),
                                            ("GROUP_SIZE_M", 8)), 4, 4))  # fmt: skip
    assert "configs=[triton.Config({'BLOCK_SIZE_M': 64" in new and "get_autotune_config()," not in new
    (after,) = find_autotune_sites(new)
    assert len(after.known) == 1


def test_heuristics_results_are_knobs():
    source = textwrap.dedent(
        """\
        import triton
        import triton.language as tl


        def warps(args):
            if args["N"] <= 1024:
                return 4
            return 8


        @triton.heuristics({"BLOCK": lambda args: min(4096, triton.next_power_of_2(args["N"])), "num_warps": warps})
        @triton.jit
        def k(x, N, BLOCK: tl.constexpr):
            pass


        def run(x, n):
            k[(1,)](x, n)
        """
    )
    found = [(p.name, p.current, p.via) for p in find_tunable_params(source) if not p.default]
    assert found == [("BLOCK", 4096, "heuristics"), ("num_warps", 4, "heuristics"), ("num_warps", 8, "heuristics")]


def test_what_a_launch_passes_for_a_name_its_heuristics_set_is_no_knob():
    """Triton's heuristics overwrite the launch's value of each name they set: a knob there would change nothing (a
    screened variant identical to the original, shown as another change)."""
    source = textwrap.dedent(
        """\
        import triton
        import triton.language as tl


        @triton.heuristics({"BLOCK": lambda args: 1024, "num_warps": lambda args: 8})
        @triton.jit
        def k(x, N, BLOCK: tl.constexpr, ROWS: tl.constexpr):
            pass


        def run(x, n):
            k[(1,)](x, n, BLOCK=256, ROWS=64, num_warps=4)
        """
    )
    found = [(p.name, p.current, p.via) for p in find_tunable_params(source)]
    assert found == [("ROWS", 64, "literal"), ("num_stages", 3, "default"), ("BLOCK", 1024, "heuristics"),
                     ("num_warps", 8, "heuristics")]  # fmt: skip
    space = Space(source, "cuda")  # the kernel's two configurations: each change says which it is in
    assert {space.describe(v).split(":")[0] for v in space.first_round(8)} == {"k (launch L12)", "k (heuristics L5)"}


@needs_suites
def test_matmul_presets_fit_shared_memory_and_render_pinned():
    space = Space((TB / "matmul_triton_autotune.py").read_text(), "cuda")
    (group,) = space.groups
    assert group.uses_dot and group.loops and group.autotune is not None
    variants = space.first_round(24)
    assert len(variants) == 24
    for variant in variants:
        values = variant.values(group.name)
        m, n, k = values["BLOCK_SIZE_M"], values["BLOCK_SIZE_N"], values["BLOCK_SIZE_K"]
        assert (m * k + k * n) * ELEMENT_BYTES * values["num_stages"] <= DeviceTarget.of("cuda").shared_memory
        (pinned,) = find_autotune_sites(space.render(variant))
        assert dict(pinned.known[0].meta)["BLOCK_SIZE_M"] == m and len(pinned.known) == 1
    assert Variant.from_json(variants[0].to_json()) == variants[0]


def test_loop_free_kernels_have_no_stages_and_one_dimensional_tiles_stay_sane():
    source = (Path(__file__).parent / "fixtures" / "add_native.py").read_text()
    space = Space(source, "cuda")
    (group,) = space.groups
    assert {k.name for k in group.knobs} == {"BLOCK", "num_warps"}
    for variant in space.first_round(100):
        values = {group.knob(k).name: v for k, v in variant.values(group.name).items()}
        assert 1 <= values["BLOCK"] / (values["num_warps"] * 32) <= 128


def test_the_diagnosis_chooses_which_knobs_first():
    source = (Path(__file__).parent / "fixtures" / "add_native.py").read_text()
    space = Space(source, "cuda")
    (group,) = space.groups
    block = next(k for k in group.knobs if k.name == "BLOCK")
    first = space.first_round(1, focus="spills")[0].values(group.name)
    assert first[block.key] < block.current  # spilling: smaller tiles first
    cost = lambda bound: CallCost("add(f32[8])", 96, None, None, 1.0, None, None, bound, "")
    spilled = CompiledKernelFacts("add_kernel", n_regs=255, n_spills=12)
    assert focus_of([cost("memory")], [spilled]) == "spills"
    assert focus_of([cost("compute"), cost("memory")], []) == "compute"
    assert focus_of([cost("unknown")], []) == "unknown"
