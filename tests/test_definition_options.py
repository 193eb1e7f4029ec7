"""Launch options set at a kernel's definition where every launch of it is in the test code and omits them: found
(and refused where a launch could pass its own), rendered as one added line, screened on the interpreter, and on a
GPU compiled with the warps and stages the line sets."""

import asyncio
import difflib
from pathlib import Path

import pytest
import torch

from geak.agent.tuning.definition_options import find_definition_sites, set_at_definition
from geak.agent.tuning.launch_space import Space, Variant
from geak.evaluator.api import EvalOptions, Evaluator
from geak.evaluator.triton_file import parse_triton_file

FIXTURE = Path(__file__).parent / "fixtures" / "rocm_launched_by_test.py"
SOURCE = FIXTURE.read_text()
ROCM = Path(__file__).resolve().parents[2] / "shared" / "suites" / "rocm" / "ROCm_v1"
needs_suites = pytest.mark.skipif(not ROCM.is_dir(), reason="the suites are not at ../shared/suites")
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
SEPARATOR = "#" * 146
GROUP = "row_sum_kernel:definition@L10"


def added_lines(before: str, after: str) -> list[str]:
    diff = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
    lines = [line for line in diff if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert all(line.startswith("+") for line in lines), lines  # nothing removed or changed
    return [line[1:] for line in lines]


def variant(**values):
    return Variant(((GROUP, tuple(values.items())),))


def test_a_kernel_launched_only_by_the_test_gets_its_warps_and_stages_at_its_definition():
    space = Space(SOURCE, "cuda")
    (group,) = space.groups
    assert group.name == GROUP and group.definition is not None
    assert [(k.name, k.current) for k in group.knobs] == [("num_warps", 4), ("num_stages", 3)]  # Triton's defaults
    assert space.set_by_test == ["row_sum_kernel: BLOCK (line 41)"]  # what the test passes stays as it is
    rendered = space.render(variant(num_warps=8, num_stages=3))
    assert added_lines(SOURCE, rendered) == ['@triton.heuristics({"num_warps": lambda args: 8})']
    assert rendered.splitlines()[9:11] == ['@triton.heuristics({"num_warps": lambda args: 8})', "@triton.jit"]
    both = space.render(variant(num_warps=1, num_stages=2))
    both_set = '@triton.heuristics({"num_warps": lambda args: 1, "num_stages": lambda args: 2})'
    assert added_lines(SOURCE, both) == [both_set]
    assert space.render(variant(num_warps=4, num_stages=3)) == SOURCE  # the defaults: nothing to write
    assert space.describe(variant(num_warps=8, num_stages=3)) == "row_sum_kernel (definition L10): num_warps 4→8"
    assert space.set_at_definition(variant(num_warps=8, num_stages=3)) == [("row_sum_kernel", ["num_warps"])]
    again = Space(both, "cuda")  # the rendered file: the heuristic's literals are its knobs now
    assert not [g for g in again.groups if g.definition is not None]
    assert {k.name: k.current for g in again.groups for k in g.knobs} == {"num_warps": 1, "num_stages": 2}


def test_the_first_round_screens_the_definition_options():
    space = Space(SOURCE, "cuda")
    first = space.first_round(20)
    assert first and all(v.changes[0][0] == GROUP for v in first)
    assert all("@triton.heuristics({" in space.render(v) for v in first)


@pytest.mark.parametrize(
    "change, options",
    [
        ("row_sum_kernel[(rows,)](x, out, cols, BLOCK=128, num_warps=2)", ("num_stages",)),  # the test passes warps
        ("row_sum_kernel[(rows,)](x, out, cols, BLOCK=128, **OPTIONS)", ()),  # what it passes is unknown
        ("launch = row_sum_kernel\n    launch[(rows,)](x, out, cols, BLOCK=128)", ()),  # launched by another name
    ],
)
def test_a_launch_that_could_pass_its_own_option_is_not_overridden(change, options):
    source = SOURCE.replace("row_sum_kernel[(rows,)](x, out, cols, BLOCK=128)", change)
    sites = find_definition_sites(source, lines_of_the_test(source))
    assert [s.options for s in sites] == ([options] if options else [])


def lines_of_the_test(source: str) -> frozenset[int]:
    return parse_triton_file(source).test_line_numbers


def test_no_definition_site_where_a_launch_is_outside_the_test_an_autotuner_or_heuristic_sets_it_or_no_triton():
    in_kernel_code = SOURCE.replace(
        "\n\n" + SEPARATOR,
        "\n\n\ndef row_sum_here(x, out):\n    row_sum_kernel[(1,)](x, out, 8, BLOCK=128)\n\n\n" + SEPARATOR,
    )
    assert find_definition_sites(in_kernel_code, lines_of_the_test(in_kernel_code)) == []
    autotuned = SOURCE.replace(
        "@triton.jit\n", "@triton.autotune(configs=[triton.Config({}, num_warps=2)], key=[])\n@triton.jit\n"
    )
    assert find_definition_sites(autotuned, lines_of_the_test(autotuned)) == []
    warps_set = SOURCE.replace("@triton.jit\n", '@triton.heuristics({"num_warps": lambda args: 2})\n@triton.jit\n')
    (site,) = find_definition_sites(warps_set, lines_of_the_test(warps_set))
    assert site.options == ("num_stages",)
    assert "lambda args: 2})\n" + '@triton.heuristics({"num_stages": lambda args: 1})\n@triton.jit' in (
        set_at_definition(warps_set, site, {"num_stages": 1})
    )
    bare = SOURCE.replace("import triton\n", "from triton import jit\n").replace("@triton.jit", "@jit")
    assert find_definition_sites(bare, lines_of_the_test(bare)) == []  # `triton.heuristics` would not resolve
    with pytest.raises(ValueError, match="num_warps cannot be set at its definition"):  # its heuristic sets it
        set_at_definition(warps_set, site, {"num_warps": 8, "num_stages": 1})


@needs_suites
def test_rocm_benchmark_files_whose_tests_launch_with_the_defaults_get_definition_knobs():
    for name, kernel in (("naive_softmax.py", "softmax_kernel_naive"), ("test_cast_matmul.py", "matmul_kernel")):
        source = (ROCM / name).read_text()
        (group,) = [g for g in Space(source, "cuda").groups if g.definition is not None]
        assert group.kernel == kernel and [k.name for k in group.knobs] == ["num_warps", "num_stages"]
    batched = (ROCM / "test_batched_vecmat.py").read_text()  # its test passes num_warps=4, num_stages=1
    assert not [g for g in Space(batched, "cuda").groups if g.definition is not None]


def screen(variants, backend):
    async def go():
        async with Evaluator(EvalOptions(backend=backend, timeout_s=180, spares=0)) as ev:
            return await ev.screen(FIXTURE, variants, deadline_s=90)

    return asyncio.run(go())


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is visible (the fixture's tensors would be on it)")
def test_definition_variants_are_screened_on_the_interpreter():
    space = Space(SOURCE, "interpreter")
    variants = [space.render(variant(num_warps=8, num_stages=3)), space.render(variant(num_warps=1, num_stages=1))]
    result = screen(variants, "interpreter")
    assert result.ok, result.message
    assert [v.status for v in result.variants] == ["ok", "ok"]


@needs_gpu
def test_on_a_gpu_the_kernel_compiles_with_the_warps_and_stages_its_definition_sets():
    space = Space(SOURCE, "cuda")
    variants = [space.render(variant(num_warps=8, num_stages=3)), space.render(variant(num_warps=1, num_stages=2))]
    result = screen(variants, "gpu")
    assert result.ok, result.message
    assert [v.status for v in result.variants] == ["ok", "ok"], [v.message for v in result.variants]
    compiled = [{(k.kernel, k.num_warps, k.num_stages) for k in v.kernels} for v in result.variants]
    assert compiled == [{("row_sum_kernel", 8, 3)}, {("row_sum_kernel", 1, 2)}]
    assert {(k.num_warps, k.num_stages) for k in result.reference_kernels} == {(4, 3)}
