"""What the reviewer of a launch-configuration change hears that the test cannot show: a constexpr that takes its
kernel onto a path adding into memory with `tl.atomic_*` (zeroed memory required, run-to-run bits)."""

from pathlib import Path

import pytest

from geak.agent.tuning.launch_space import Space, Variant
from geak.agent.tuning.review_notes import ParamChange, atomic_path_notes, pinned_note

SUITE = Path(__file__).resolve().parents[2] / "shared" / "suites" / "tritonbench_revised" / "TritonBench_G_v1"

KERNEL = """import triton
import triton.language as tl

@triton.jit
def mm(c_ptr, x, SPLIT_K: tl.constexpr, MODE: tl.constexpr, OTHER: tl.constexpr):
    if SPLIT_K == 1:
        tl.store(c_ptr, x)
    else:
        tl.atomic_add(c_ptr, x)
    if not MODE > 2 and MODE != 0:
        tl.store(c_ptr, x)
    else:
        tl.atomic_max(c_ptr, x)
    if OTHER == x:
        tl.atomic_add(c_ptr, x)
"""


@pytest.mark.parametrize(
    ("param", "old", "new", "atomic"),
    [
        ("SPLIT_K", 1, 2, "tl.atomic_add"),  # store -> atomic: said
        ("SPLIT_K", 2, 1, None),  # atomic -> store: nothing to add up
        ("SPLIT_K", 2, 4, None),  # atomic both ways
        ("MODE", 1, 3, "tl.atomic_max"),  # a compound test, read with the value
        ("OTHER", 1, 2, None),  # a test that reads anything else is left alone
    ],
)
def test_a_change_is_said_only_where_its_new_value_alone_takes_an_atomic_path(param, old, new, atomic):
    notes = atomic_path_notes(KERNEL, [ParamChange("mm", param, old, new)])
    if atomic is None:
        assert notes == []
    else:
        (note,) = notes
        assert note.startswith(f"mm: {param} {old}→{new} takes its `{atomic}` path (line ")
        start = "must start at zero" if atomic.endswith("add") else "must hold its starting value first"
        assert start in note and "varies from run to run" in note


def test_another_kernel_or_an_unparsable_source_says_nothing():
    assert atomic_path_notes(KERNEL, [ParamChange("other", "SPLIT_K", 1, 2)]) == []
    assert atomic_path_notes("def broken(:", [ParamChange("mm", "SPLIT_K", 1, 2)]) == []


@pytest.mark.skipif(not SUITE.is_dir(), reason="../shared/suites (the benchmark suites) is not beside this clone")
def test_the_suite_file_whose_search_winner_split_k_the_review_names():
    """TritonBench-revised `matmul_dequantize.py`: the search's 3.6x winner on an H200 sets `SPLIT_K 1→2`."""
    source = (SUITE / "matmul_dequantize.py").read_text()
    space = Space(source, "cuda")
    group = next(g for g in space.groups if g.kernel == "matmul_kernel" and any(k.name == "SPLIT_K" for k in g.knobs))
    split_k = next(k for k in group.knobs if k.name == "SPLIT_K")
    variant = Variant(((group.name, ((split_k.key, 2),)),))
    (note,) = atomic_path_notes(source, space.param_changes(variant))
    assert note.startswith("matmul_kernel: SPLIT_K 1→2 takes its `tl.atomic_add` path (line 213)")
    assert atomic_path_notes(source, space.param_changes(Variant(((group.name, ((split_k.key, 1),)),)))) == []


def test_an_autotuned_kernel_pinned_to_one_config_is_said_and_a_launch_change_is_not():
    source = """import triton
import triton.language as tl

@triton.autotune(configs=[triton.Config({"B": 32}), triton.Config({"B": 64}, num_warps=8)], key=["n"])
@triton.jit
def tuned(x, n, B: tl.constexpr):
    pass

@triton.jit
def plain(x, n, B: tl.constexpr):
    pass

def run(x, n):
    tuned[(1,)](x, n)
    plain[(1,)](x, n, B=16)
"""
    space = Space(source, "cuda")
    tuned = next(g for g in space.groups if g.autotune is not None)
    plain = next(g for g in space.groups if g.kernel == "plain")
    b = next(k for k in tuned.knobs if k.name == "B")
    assert space.pinned(Variant(((tuned.name, ((b.key, 128),)),))) == [("tuned", 2)]
    launch = next(k for k in plain.knobs if k.name == "B")
    assert space.pinned(Variant(((plain.name, ((launch.key, 32),)),))) == []
    assert pinned_note("tuned", 2).startswith("tuned: its autotuner's 2 configs are replaced by the one timed here")
