"""Checks that see past the test (CPU, Triton's interpreter): shape probes (other sizes), value probes (larger
values of one sign), outputs the reference never writes, and the reference as the oracle of what can be probed."""

from __future__ import annotations

import asyncio
import re
import types

import pytest
import torch
from fixture_check import FIXTURES, check_fixture

from geak.evaluator.api import EvalOptions, Evaluator
from geak.evaluator.compare import compare
from geak.evaluator.job.capture import CallRecorder, draw_probe
from geak.evaluator.job.probe_variants import dense_strides, shape_variants, value_signs
from geak.evaluator.reference_probes import ReferenceProbes, hung_probe, rejudged_after_rerun
from geak.evaluator.reproduction import unwritten_elements
from geak.evaluator.shared.poison import second_poison
from geak.evaluator.shared.probe_rules import probe_place

# Which shape and value probes a check makes must not depend on the machine's speed: a budget this large affords all
# of them (``probes.VARIANTS_PER_CHECK``) for these small fixtures, where a share of the check would afford fewer on a
# loaded machine.
PROBE_BUDGET_S = 30.0


def check(name: str, against: str | None, timeout_s: float = 120, **options):
    return check_fixture(name, against, timeout_s=timeout_s, probe_budget_s=PROBE_BUDGET_S, **options)


def test_each_probe_is_named_in_the_progress_as_it_runs():
    said: list[str] = []
    r = check("probes/sub.py", "probes/sub.py", progress=said.append)
    assert r.ok, r.message
    probes = [m for m in said if m.startswith("running ") and "#" in m]
    first = [m for m in probes if m.startswith("running fresh inputs #1 ") and m.endswith("])")]
    assert len(first) == 2 and first[0] == first[1], said  # the reference made it, the candidate replayed it
    assert f"{first[0]} (again)" in probes and f"{first[0]} (without kernels)" in probes, said
    assert any(m.startswith("running other sizes #") for m in probes), said
    assert any(m.startswith("running other values #") for m in probes), said


def mismatch_places(result) -> list[str]:
    return [m.where for m in result.comparison.mismatches]


# ----------------------------------------------------------------------------------------- shapes


def test_a_subtraction_right_only_at_the_tested_size_fails_at_other_sizes():
    r = check("probes/sub_only_at_tested_sizes.py", "probes/sub.py")
    assert not r.ok and r.stage == "exec", r.message
    wrong = mismatch_places(r)
    assert wrong and all(w.startswith("other sizes") for w in wrong), wrong
    assert any("f32[3001]" in w for w in wrong), wrong


def test_a_reference_passes_its_own_shape_and_value_probes():
    r = check("probes/sub.py", "probes/sub.py")
    assert r.ok, r.message
    assert r.comparison.fresh_calls == 1 and r.comparison.shape_calls >= 3 and r.comparison.value_calls == 2
    assert "at other sizes" in r.message and "on other values" in r.message
    fresh_only = check("probes/sub.py", "probes/sub.py", probe_variants=False)  # --fresh-inputs-only
    assert fresh_only.ok and fresh_only.comparison.fresh_calls == 1
    assert fresh_only.comparison.shape_calls == fresh_only.comparison.value_calls == 0


def test_a_softmax_of_one_1024_wide_block_fails_on_a_row_wider_than_1024():
    r = check("probes/softmax_one_block.py", "probes/softmax.py")
    assert not r.ok, r.message
    wrong = mismatch_places(r)
    assert any(w.startswith("other sizes") and "f32[4,1563]" in w for w in wrong), wrong
    assert not any(w.startswith(("test_", "fresh")) for w in wrong), wrong


def test_a_softmax_without_the_max_subtraction_fails_on_large_values():
    r = check("probes/softmax_no_max.py", "probes/softmax.py")
    assert not r.ok, r.message
    wrong = mismatch_places(r)
    assert any(w.startswith("other values") for w in wrong), wrong
    assert not any(w.startswith(("test_", "fresh")) for w in wrong), wrong


@pytest.mark.parametrize("block", [128, 64])
def test_a_larger_block_on_unmasked_loads_fails_at_a_size_the_reference_handles(block: int):
    """The row sum steps over K = 128 by 32 without a mask: right for every multiple of 32. With a larger block it
    passes the test but not K = 160, which the reference's own step handles; the other probes move K by whole
    blocks of 32 too (96, 160), never to a size where the reference itself reads out of bounds."""
    r = check(f"probes/row_sum_block{block}.py", "probes/row_sum.py")
    assert not r.ok and r.stage == "exec", r.message
    wrong = mismatch_places(r)
    probe = "f32[8,160]) (multiples of the reference's unmasked blocks only (128→160))"
    assert any(probe in w for w in wrong), wrong
    assert all(int(re.search(r"f32\[\d+,(\d+)\]", w)[1]) % 32 == 0 for w in wrong), wrong


def test_a_smaller_block_on_unmasked_loads_passes_where_the_reference_does():
    for candidate in ("probes/row_sum_block16.py", "probes/row_sum.py"):
        r = check(candidate, "probes/row_sum.py")
        assert r.ok and r.comparison.shape_calls >= 1, (candidate, r.message, r.comparison.notes)
        # no probe at a size where the reference reads out of bounds, judged or skipped as chance has it
        assert not any("nondeterministic" in note for note in r.comparison.notes), r.comparison.notes
        assert not any("128→160" in n for n in r.comparison.notes), r.comparison.notes  # the probe judged


def test_sizes_the_reference_refuses_are_skipped_with_its_reason():
    r = check("probes/sub_one_size_only.py", "probes/sub_one_size_only.py")
    assert r.ok, r.message
    refused = [n for n in r.comparison.notes if n.startswith("other sizes") and "multiples of 1000" in n]
    assert len(refused) >= 3, r.comparison.notes
    assert r.comparison.shape_calls == 0 and r.comparison.probes_skipped >= 3


def test_a_reference_that_crashes_at_other_sizes_loses_only_those_probes():
    r = check("probes/sub_crashes_elsewhere.py", "probes/sub_crashes_elsewhere.py")
    assert r.ok, r.message
    crashed = [n for n in r.comparison.notes if n.startswith("other sizes") and "crashed" in n and "SIGSEGV" in n]
    assert crashed and r.comparison.shape_calls == 0, r.comparison.notes
    assert r.comparison.fresh_calls == 1 and r.comparison.value_calls >= 1


def test_values_on_which_the_reference_overflows_are_skipped():
    r = check("probes/exp_steep.py", "probes/exp_steep.py")
    assert r.ok, r.message
    assert r.comparison.value_calls == 0, r.comparison.notes
    assert any(n.startswith("other values") and "not finite" in n for n in r.comparison.notes), r.comparison.notes


def test_a_probe_the_reference_fails_on_when_run_again_leaves_and_one_the_rerun_never_reached_stays(tmp_path):
    """A reference that reads out of bounds at other sizes may fault there only in some runs: a run that fails on a
    probe the first run passed makes the probe unusable, as a differing output does."""
    faulted, unreached = ({"index": i, "kind": "shape", "wrapper": "add", "signature": f"add(f32[{n}])", "spec": {},
                           "launches": {}} for i, n in ((2, 1001), (3, 999)))  # fmt: skip
    probes = ReferenceProbes((faulted, unreached), frozenset(), (), {})
    rerun = {"fresh": [{"index": 2, "signature": "add(f32[1001])", "status": "error",
                        "message": "torch.AcceleratorError: CUDA error: an illegal memory access was encountered\n"
                        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"}]}
    kept, changed = rejudged_after_rerun(probes, rerun, tmp_path, tmp_path, EvalOptions())
    assert changed and kept.usable == (unreached,)
    assert kept.skipped == ("other sizes #3 add(f32[1001]): the reference failed on these inputs when run again "
                            "(torch.AcceleratorError: CUDA error: an illegal memory access was encountered), so it "
                            "cannot judge a candidate there",)  # fmt: skip


HANGS = "probes/sub_hangs_sometimes.py"  # hangs at 2999 elements where a candidate replays a probe, not where made
HANG_LIMIT_S = 12


def _checked(candidate: str, reference: str, progress: list[str]):
    async def go():
        opts = EvalOptions(
            backend="interpreter", timeout_s=HANG_LIMIT_S, spares=0, probe_stall_s=3, probe_budget_s=PROBE_BUDGET_S
        )
        async with Evaluator(opts) as ev:
            return await ev.check(source=candidate, against=FIXTURES / reference, progress=progress.append)

    return asyncio.run(go())


def test_a_probe_the_reference_hangs_on_in_its_twins_run_leaves_and_the_twin_passes_without_it():
    said: list[str] = []
    r = check(HANGS, HANGS, progress=said.append, timeout_s=HANG_LIMIT_S, probe_stall_s=3)
    assert r.ok, r.message
    assert any(m.startswith("running the tests of") and "again without other sizes #4 sub(f32[2999]" in m
               for m in said), said  # fmt: skip
    hung = [n for n in r.comparison.notes if n.startswith("other sizes #4") and "hung" in n and "twin" in n]
    assert hung, r.comparison.notes
    assert r.comparison.shape_calls >= 2  # the other sizes still judge it


def test_a_candidate_that_hangs_where_the_reference_hangs_when_run_again_passes_without_that_probe():
    said: list[str] = []
    text = (FIXTURES / HANGS).read_text()
    candidate = text.replace("    out = torch.empty_like(x)", "    out = torch.empty_like(x)  # not a twin")
    r = _checked(candidate, HANGS, said)
    assert r.ok, r.message
    assert any("is it deterministic?" in m for m in said), said  # not a twin: the reference ran again
    again = "hung on these inputs when run again"
    hung = [n for n in r.comparison.notes if n.startswith("other sizes #4") and again in n]
    assert hung, r.comparison.notes


def test_a_candidate_that_hangs_where_the_reference_does_not_fails():
    said: list[str] = []
    r = _checked((FIXTURES / HANGS).read_text(), "probes/sub.py", said)
    assert not r.ok and r.stage == "call" and r.tests[0].kind == "timeout", r.message
    assert "other sizes #4 sub(f32[2999]" in r.message and r.message.count("other sizes #4") == 1, r.message
    assert any("is it deterministic?" in m for m in said), said  # the reference ran the probe again and finished


def test_a_probe_is_named_by_what_it_draws_in_any_of_its_runs():
    assert hung_probe({"test": "other sizes #7 f(f32[16,1040]) (again)"}) == "other sizes #7 f(f32[16,1040])"
    assert hung_probe({"test": "fresh inputs #2 f(f32[8]) (without kernels)"}) == "fresh inputs #2 f(f32[8])"
    assert hung_probe({"test": "test_f"}) is None
    assert probe_place("other sizes #7 f(f32[16,1040]) (again)") == probe_place("other sizes #9 f(f32[16,1040])")
    assert probe_place("other sizes #7 f(f32[16,1040])") == "other sizes f(f32[16,1040])"
    spun = "other sizes #7 spin(f32[16,1040], f32[16,16], i32[304], 304, 3, 16, 1, 128)"
    other_call = "other sizes #5 spin(f32[16,1040], f32[16,16], i32[304], 304, 2, 16, 1, 128)"
    assert probe_place(spun) == probe_place(other_call)
    assert probe_place(spun) == "other sizes spin(f32[16,1040], f32[16,16], i32[304])"
    assert probe_place(spun) != probe_place("other sizes #9 spin(f32[16,16], f32[16,16], i32[304], 304, 3, 16, 1, 128)")
    assert probe_place(spun) != probe_place("fresh inputs #7 spin(f32[16,1040], f32[16,16], i32[304], 304, 3, 16, 1)")


def test_a_reference_that_hangs_in_a_probe_it_makes_is_stopped_early_and_runs_again_without_it():
    """Its own test passes; the fresh probe spins. The probe's silence ends the job well before the job's time limit,
    and the reference runs again without that probe, so the file passes against itself (it failed its own check
    after 150 s in a suite run on an H200)."""
    said: list[str] = []
    fixture = "probes/sub_spins_off_its_inputs.py"
    r = check(fixture, fixture, progress=said.append, timeout_s=120, probe_stall_s=2)
    assert r.ok, r.message
    hung = [m for m in said if "hung in fresh inputs #1 sub(" in m]
    assert hung and "said nothing for 2 s" in hung[0] and hung[0].endswith("running it again without that probe"), said
    assert any("hung on these inputs in an earlier run" in n for n in r.comparison.notes), r.comparison.notes


def test_a_slow_probe_whose_programs_keep_running_is_not_taken_for_a_hang():
    """The fixture's fresh probe runs its kernel for 6 s by its own clock (``SLOW_S``), three times the stall limit
    given here, however fast the machine; the interpreter's heartbeats (at most one a second) keep it alive."""
    said: list[str] = []
    fixture = "probes/sub_slow_off_its_inputs.py"
    r = check(fixture, fixture, progress=said.append, timeout_s=120, probe_stall_s=2)
    assert r.ok, r.message
    beats = [m for m in said if m.startswith("running fresh inputs #1 ") and "kernel programs interpreted" in m]
    assert len(beats) >= 3, said  # each of its runs outlasted the stall limit, heartbeat after heartbeat
    assert not [m for m in said if "hung" in m], said
    assert not [n for n in r.comparison.notes if "hung" in n], r.comparison.notes


def test_a_probe_that_compiles_longer_than_its_stall_limit_is_not_taken_for_a_hang():
    said: list[str] = []
    fixture = "probes/sub_compiling_off_its_inputs.py"  # said to compile after 1 s (``SAY_AFTER_S``), for 5 s
    # fresh inputs only: the fixture "compiles" on every call off its test's inputs, where Triton compiles once
    r = check(fixture, fixture, progress=said.append, timeout_s=120, probe_stall_s=3, probe_variants=False)
    assert r.ok, r.message
    compiling = [m for m in said if m.endswith(": compiling sub_kernel[num_warps=4, num_stages=3]")]
    compiled = [m for m in said if ": compiled sub_kernel[num_warps=4, num_stages=3] in " in m]
    assert compiling and compiled and compiling[0].startswith("running fresh inputs #1 "), said
    assert not [m for m in said if "hung" in m], said
    assert not [n for n in r.comparison.notes if "hung" in n], r.comparison.notes


# ----------------------------------------------------------------------------------------- unwritten outputs


def test_what_the_reference_never_writes_is_not_compared_and_the_check_says_so():
    right = check("probes/scale_fully_launched.py", "probes/scale_partly_launched.py")
    assert right.ok, right.message
    caveat = [c for c in right.caveats if "unwritten" in c]
    assert caveat and "return['block_4'], test_scale → return['block_8']" in caveat[0], right.caveats
    assert "block_1" not in caveat[0] and "block_2" not in caveat[0]  # 2 elements: blocks of 1 and 2 write them
    itself = check("probes/scale_partly_launched.py", "probes/scale_partly_launched.py")
    assert itself.ok, itself.message


def test_geak_eval_records_carry_the_caveat():
    from geak.agent.batch.dataloaders.scoring import score_code

    async def go():
        async with Evaluator(EvalOptions(backend="interpreter", timeout_s=120, spares=0)) as ev:
            code = (FIXTURES / "probes" / "scale_fully_launched.py").read_text()
            return await score_code(ev, code, FIXTURES / "probes" / "scale_partly_launched.py", timing=False)

    record = asyncio.run(go()).to_dict()
    assert record["pass_call"] and record["pass_exe"], record
    assert any("unwritten" in c and "block_8" in c for c in record["caveats"]), record["caveats"]


def test_leaving_unwritten_what_the_reference_writes_still_fails():
    r = check("probes/scale_half_written.py", "probes/scale_partly_launched.py")
    assert not r.ok
    assert any("['block_1']" in w and w.startswith("test_scale") for w in mismatch_places(r)), r.message


def test_the_second_run_keeps_the_interpreter_telling_the_files_code_its_tensors_are_on_the_gpu():
    r = check("probes/add_asserts_device.py", "probes/add_asserts_device.py")
    assert r.ok, r.message
    assert r.comparison.fresh_calls == 1 and r.comparison.shape_calls >= 1 and not r.comparison.probes_skipped, r
    assert not r.caveats[1:], r.caveats  # every element written, in both runs (the first caveat: the interpreter)


def test_unwritten_elements_are_told_by_the_two_poisons_element_by_element():
    first = torch.tensor([1.0, float("nan"), float("nan"), 2.0])
    again = torch.tensor([1.0, second_poison(torch.float32), float("nan"), 2.0])
    ints = torch.tensor([7, torch.iinfo(torch.int32).max], dtype=torch.int32)
    ints_again = torch.tensor([7, second_poison(torch.int32)], dtype=torch.int32)
    masks = unwritten_elements({"x": first, "i": [ints]}, {"x": again, "i": [ints_again]})
    assert set(masks) == {"['x']", "['i'][0]"}
    assert masks["['x']"].tolist() == [False, True, False, False]  # NaN twice: a NaN the reference computes
    assert masks["['i'][0]"].tolist() == [False, True]
    candidate = torch.tensor([1.0, 5.0, float("nan"), 2.0])
    assert not compare(first, candidate, "", undefined={"": masks["['x']"]})
    assert compare(first, torch.tensor([1.0, 5.0, 3.0, 2.0]), "", undefined={"": masks["['x']"]})


# ----------------------------------------------------------------------------------------- variants


def _recorded(fn, *args, **kwargs):
    module = types.ModuleType("m")
    module.f = fn
    recorder = CallRecorder(module, ["f"], keep_args="integers")
    recorder.recording = True
    module.f(*args, **kwargs)
    return recorder.calls[0], recorder.originals["f"]


def test_only_the_first_call_of_a_signature_is_described_and_kept_for_probes():
    def f(x, index, n):
        if n < 0:
            raise ValueError("n")
        return x

    module = types.ModuleType("m")
    module.f = f
    recorder = CallRecorder(module, ["f"], keep_args="integers")
    recorder.recording = True
    x, index = torch.tensor([1.0, -3.0]), torch.tensor([4, 2])
    with pytest.raises(ValueError):
        module.f(x, index, -1)  # raised: no call to replay, so the next of its signature is its first
    module.f(x, index, 2)
    module.f(x * 2, index + 1, 2)  # the same signature again
    module.f(torch.zeros(3), index, 3)  # another
    first, again, other = recorder.calls
    assert first.spec["args"][0] == {"t": "tensor", "shape": [2], "stride": [1], "dtype": "float32",
                                     "contiguous": True, "nonneg": False, "scale": 3.0}  # fmt: skip
    assert first.spec["args"][1]["min"] == 2 and torch.equal(first.args[1], index) and first.args[0] is None
    assert "scale" not in again.spec["args"][0] and "min" not in again.spec["args"][1] and again.args == ()
    assert other.spec["args"][0]["scale"] == 0.0 and torch.equal(other.args[1], index)
    assert [c.signature for c in recorder.unique_calls(8)] == [first.signature, other.signature]


def test_a_timing_capture_describes_no_values_and_a_recorder_without_room_records_nothing():
    module = types.ModuleType("m")
    module.f = lambda x: x
    timing = CallRecorder(module, ["f"], keep_args=True, describe_values=False)
    timing.recording = True
    module.f(torch.tensor([1.0, 2.0]))
    module.f(torch.tensor([1.0, 2.0]))
    assert [set(c.spec["args"][0]) for c in timing.calls] == [{"t", "shape", "stride", "dtype", "contiguous"}] * 2
    assert all(torch.equal(c.args[0], torch.tensor([1.0, 2.0])) for c in timing.calls)  # both kept for replay
    replaying = CallRecorder(module, ["f"], keep_args="integers", limit=0)
    replaying.recording = True
    assert module.f(torch.tensor([3.0])).item() == 3.0 and replaying.calls == []


def test_shape_variants_change_shared_sizes_and_sizes_as_scalars_together_but_not_tiles():
    def f(x, y, n, BLOCK_SIZE):
        return x

    call, fn = _recorded(f, torch.randn(64, 781), torch.randn(781), 781, BLOCK_SIZE=64)
    variants = {v.label.split(" (")[0]: v for v in shape_variants(call, fn)}
    assert list(variants) == ["sizes one above", "sizes one below", "a wide row", "small sizes"]
    args, kwargs = draw_probe(call, 1, variants["sizes one above"].spec)  # 64 stays a multiple of 16: 80
    assert args[0].shape == (80, 782) and args[1].shape == (782,) and args[2] == 782 and kwargs["BLOCK_SIZE"] == 64
    wide, _ = draw_probe(call, 1, variants["a wide row"].spec)
    assert wide[0].shape == (16, 1563) and wide[2] == 1563
    small, _ = draw_probe(call, 1, variants["small sizes"].spec)
    assert small[0].shape == (16, 3)


def test_sizes_an_index_tensor_depends_on_stay_and_none_shrinks_below_its_values():
    def f(table, index, offsets, packed):
        return table

    index = torch.tensor([0, 5, 49, 42])  # rows of `table` (100 of them)
    offsets = torch.tensor([0, 10, 30])  # the last offset is the size of `packed` (30)
    call, fn = _recorded(f, torch.randn(100, 16), index, offsets, torch.randn(30, 8))
    rows = set()
    for variant in shape_variants(call, fn):
        args, _ = draw_probe(call, 2, variant.spec)
        assert sorted(args[1].tolist()) == sorted(index.tolist()) and torch.equal(args[2], offsets)
        assert args[0].shape[0] > 49, variant.label  # indexed up to 49: never fewer rows than 50
        assert args[3].shape[0] == 30, variant.label
        rows.add(args[0].shape[0])
    assert rows == {101, 99, 50}, rows


def test_strides_keep_the_order_of_dimensions_and_signs_follow_the_inputs():
    assert dense_strides([5, 7], [1, 4]) == [1, 5]  # a transposed tensor stays transposed
    assert dense_strides([5, 7], [7, 1]) == [7, 1]

    def f(x, w):
        return x

    call, _ = _recorded(f, torch.randn(8), torch.rand(8))
    assert value_signs(call) == (1, -1)
    nonneg, _ = _recorded(f, torch.rand(8), torch.rand(8))
    assert value_signs(nonneg) == (1,)
