"""Screening: the job end to end on Triton's CPU interpreter (correctness only; timing says it needs a GPU), the
caller's verdict on forged or damaged reports, the halving rule and the plan."""

import asyncio
from collections import Counter
from pathlib import Path

import pytest
import torch

from geak.evaluator import screening_verdict
from geak.evaluator.api import EvalOptions, Evaluator
from geak.evaluator.pool import JobOutcome
from geak.evaluator.runtime_facts import RuntimeFacts
from geak.evaluator.screening_verdict import best_first, screen_result
from geak.evaluator.shared.protocol import screen_output_file
from geak.evaluator.shared.screening import ScreenPlan, survivors

FIXTURES = Path(__file__).parent / "fixtures"
REF = FIXTURES / "add_native.py"
SOURCE = REF.read_text()


def screen(variants, **kwargs):
    async def go():
        async with Evaluator(EvalOptions(backend="interpreter", timeout_s=120, spares=0)) as ev:
            return await ev.screen(REF, variants, deadline_s=60, **kwargs)

    return asyncio.run(go())


def test_screening_on_the_interpreter_checks_every_variant_and_says_timing_needs_a_gpu():
    variants = [
        SOURCE.replace("BLOCK=256)", "BLOCK=512, num_warps=8)").replace("cdiv(n, 256)", "cdiv(n, 512)"),
        SOURCE.replace("tl.store(out_ptr + offs, x + y", "tl.store(out_ptr + offs, x - y"),  # wrong
        SOURCE.replace("def add(", "def add(:"),  # does not parse
        SOURCE.replace("    out = torch.empty_like(x)\n", "    raise RuntimeError('no')\n"),  # raises
        SOURCE,  # the same configuration
    ]
    result = screen(variants)
    assert result.ok and not result.timed and result.backend == "interpreter"
    assert "not timed: timing needs a GPU" in result.message
    statuses = [(v.label, v.status) for v in result.variants]
    assert statuses == [("v1", "ok"), ("v2", "wrong"), ("v3", "failed"), ("v4", "failed"), ("v5", "ok")]
    assert "differ" in result.variants[1].message
    assert result.variants[2].message == "does not parse"
    assert "no" in result.variants[3].message
    assert all(v.screen_ms is None for v in result.variants)
    assert best_first(result) == []
    (call,) = result.calls  # the test's one call: its bytes, but no time (not timed here)
    assert call.bytes_moved == 3 * 3000 * 4 and call.bound == "unknown"


def test_a_rocm_benchmark_file_is_screened_with_its_benchmark_module():
    """ROCm-suite files import geak_eval's benchmark module: the screening job provides it as the bench job does."""
    rocm = FIXTURES / "rocm_scale_add.py"
    source = rocm.read_text()
    launch = "cdiv(n, 256),)](x, y, out, alpha, n, BLOCK=256)"
    wider = source.replace(launch, launch.replace("256", "512"))
    assert wider != source

    async def go():
        async with Evaluator(EvalOptions(backend="interpreter", timeout_s=120, spares=0)) as ev:
            return await ev.screen(rocm, [wider], deadline_s=60)

    result = asyncio.run(go())
    assert result.ok, result.message
    assert [v.status for v in result.variants] == ["ok"]
    assert result.calls  # the benchmark's calls were captured through the module


def test_a_call_the_reference_does_not_reproduce_is_left_out_of_the_jobs_rough_check_too():
    """The caller leaves such a call to the full check; the job's own check used to call every variant of it wrong,
    so that none was timed."""
    unstable = SOURCE.replace(
        "    out = torch.empty_like(x)\n",
        "    RUNS.append(1)\n    y[0] = float(10 ** len(RUNS))  # ten times the last run's: roughly apart, always\n"
        "    out = torch.empty_like(x)\n",
    ).replace("import torch\n", "import torch\n\nRUNS = []\n", 1)
    wider = unstable.replace("BLOCK=256)", "BLOCK=512)").replace("cdiv(n, 256)", "cdiv(n, 512)")
    result = screen([wider], baseline=unstable)
    assert result.ok, result.message
    assert [(v.status, v.message) for v in result.variants] == [("ok", "")]
    assert "the reference does not reproduce" in result.message


def test_a_variant_of_another_baseline_is_compared_with_that_baseline():
    baseline = SOURCE.replace("BLOCK=256)", "BLOCK=1024)").replace("cdiv(n, 256)", "cdiv(n, 1024)")
    result = screen([SOURCE], baseline=baseline)
    assert [v.status for v in result.variants] == ["ok"]


# ----------------------------------------------------------------------------------------- the caller's verdict


def write(folder: Path, label: str, call: int, value, run: str = "") -> None:
    torch.save({"return": value, "args": [], "kwargs": {}}, folder / screen_output_file(label, call, run))


def report(variants: dict, reference_samples=(1.0, 1.1, 0.9), timed=True) -> dict:
    return {
        "calls": [{"wrapper": "add", "signature": "add(f32[8])", "bytes": 96, "flops": None}],
        "reference": {"status": "ok", "kernels": [], "samples": list(reference_samples), "rung": 2},
        "variants": variants,
        "timing": {"timed": timed, "estimates_ms": [1.0]},
        "device_limits": {},
        "seconds": 3.0,
    }


def verdict(tmp_path, result, labels):
    outcome = JobOutcome("ok", result)
    return screen_result(outcome, labels, tmp_path, RuntimeFacts(backend="cuda", device="fake"), None, EvalOptions())


def test_the_caller_compares_outputs_itself_whatever_the_job_claims(tmp_path):
    ref = torch.arange(8.0)
    for run in ("", "again"):
        write(tmp_path, "reference", 0, ref, run)
    write(tmp_path, "v1", 0, ref + 1)  # claims ok, but differs
    write(tmp_path, "v2", 0, ref.clone())  # claims wrong (the job's rough check), but matches
    write(tmp_path, "v3", 0, ref.clone())
    variants = {
        "v1": {"status": "ok", "samples": [0.5, 0.5, 0.5], "rung": 2},
        "v2": {"status": "wrong", "message": "far", "samples": [], "rung": 0},
        "v3": {"status": "ok", "samples": [0.8, 0.7, 0.9], "rung": 2},
        "v4": {"status": "ok", "samples": [0.1], "rung": 2},  # claims ok, saved nothing
    }
    result = verdict(tmp_path, report(variants), ["v1", "v2", "v3", "v4", "v5"])
    by_label = {v.label: v for v in result.variants}
    assert by_label["v1"].status == "wrong" and by_label["v1"].screen_ms is None
    assert by_label["v2"].status == "ok" and by_label["v2"].screen_ms is None  # correct, but not timed
    assert by_label["v3"].status == "ok" and by_label["v3"].screen_ms == pytest.approx(0.8)
    assert by_label["v4"].status == "wrong" and "No such file" in by_label["v4"].message
    assert by_label["v5"].status == "not run"  # the job did not report it
    assert result.reference_ms == pytest.approx(1.0)
    assert [v.label for v in best_first(result)] == ["v3"]


def test_over_many_calls_each_variant_is_told_its_first_mismatch_and_the_reference_is_read_once_a_call(
    tmp_path, monkeypatch
):
    refs = [torch.arange(8.0) * (i + 1) for i in range(3)]
    for i, ref in enumerate(refs):
        for run in ("", "again"):
            write(tmp_path, "reference", i, ref, run)
    for i, ref in enumerate(refs):
        write(tmp_path, "v1", i, ref.clone())  # matches every call
        write(tmp_path, "v2", i, ref + (1 if i >= 1 else 0))  # differs from the second call on
        if i != 2:
            write(tmp_path, "v3", i, ref.clone())  # saved no third output
    write(tmp_path, "v4", 0, refs[0] + 1)  # differs where only its first call was saved
    variants = {label: {"status": "ok", "samples": [0.5], "rung": 1} for label in ("v1", "v2", "v3", "v4")}
    result = report(variants)
    result["calls"] = [dict(result["calls"][0], signature=f"add(f32[{i}])") for i in range(3)]
    result["timing"]["estimates_ms"] = [1.0, 1.0, 1.0]
    loads = []
    real_load = screening_verdict.load_output
    monkeypatch.setattr(screening_verdict, "load_output", lambda path: loads.append(path.name) or real_load(path))
    by_label = {v.label: v for v in verdict(tmp_path, result, ["v1", "v2", "v3", "v4"]).variants}
    assert by_label["v1"].status == "ok"
    assert by_label["v2"].status == "wrong" and by_label["v2"].message.startswith("call 2")
    assert by_label["v3"].status == "wrong" and by_label["v3"].message.startswith("call 3: ")
    assert by_label["v4"].status == "wrong" and by_label["v4"].message.startswith("call 1")
    references = Counter(name for name in loads if name.startswith("screen_reference_") and "again" not in name)
    assert references == dict.fromkeys(references, 1) and len(references) == 3  # for its stability and every variant


def test_calls_the_reference_does_not_reproduce_are_left_to_the_check(tmp_path):
    write(tmp_path, "reference", 0, torch.arange(8.0))
    write(tmp_path, "reference", 0, torch.arange(8.0) * 2, "again")
    write(tmp_path, "v1", 0, torch.arange(8.0) * 3)
    result = verdict(tmp_path, report({"v1": {"status": "ok", "samples": [0.9], "rung": 1}}), ["v1"])
    assert result.variants[0].status == "ok"
    assert "the reference does not reproduce" in result.message


def test_outputs_the_job_names_bit_for_bit_the_references_are_not_saved_again(tmp_path):
    """TritonBench-revised `rope_embedding.py`: ten calls of 268 MB a variant. What the job names identical is taken
    as it says (a lie would only send a wrong variant to the full check); what it saved is compared as ever."""
    ref = torch.arange(8.0)
    write(tmp_path, "reference", 0, ref)
    write(tmp_path, "reference", 1, ref * 2)  # call 0's second run named identical, not saved; call 1's saved
    write(tmp_path, "reference", 1, ref * 2, "again")
    write(tmp_path, "v2", 1, ref)  # call 0 named identical; call 1 saved, and it differs
    variants = {
        "v1": {"status": "ok", "samples": [0.5], "rung": 1, "identical": [0, 1]},  # nothing saved
        "v2": {"status": "ok", "samples": [0.4], "rung": 1, "identical": [0]},
    }
    result = report(variants)
    result["calls"] *= 2
    result["reference"]["identical"] = [0]
    result["timing"]["estimates_ms"] = [1.0, 1.0]
    by_label = {v.label: v for v in verdict(tmp_path, result, ["v1", "v2"]).variants}
    assert by_label["v1"].status == "ok" and by_label["v1"].screen_ms == pytest.approx(0.5)
    assert by_label["v2"].status == "wrong" and "call 2" in by_label["v2"].message
    result["variants"]["v1"]["identical"] = [0, 2]  # no call 3
    assert "malformed" in verdict(tmp_path, result, ["v1"]).message


def test_identical_outputs_are_the_same_structure_bit_for_bit():
    from geak.evaluator.job.screening import _identical

    out = {"return": (torch.arange(4.0), 3, "untouched"), "args": [None, torch.ones(2)], "kwargs": {}}
    same = {"return": (torch.arange(4.0), 3, "untouched"), "args": [None, torch.ones(2)], "kwargs": {}}
    assert _identical(out, same)
    assert not _identical(out, {**same, "args": [None, torch.ones(2, dtype=torch.float64)]})  # equal values, not bits
    assert not _identical(out, {**same, "return": [torch.arange(4.0), 3, "untouched"]})
    assert not _identical(out, {**same, "return": (torch.arange(4.0) + 1e-7, 3, "untouched")})
    nan = torch.tensor([float("nan")])
    assert not _identical(nan, nan.clone())  # saved and compared by the caller, which weighs NaN


@pytest.mark.parametrize(
    "gpu", [False, pytest.param(True, marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU"))]
)
def test_the_jobs_rough_check_weighs_each_float_type_against_the_references_scale(gpu):
    from geak.evaluator.job.screening import _roughly_equal

    for dtype in (torch.bfloat16, torch.float16, torch.float32, torch.float64):
        ref = torch.linspace(-4, 4, 1000, dtype=dtype)
        assert _roughly_equal(ref, ref * 1.01, gpu) and _roughly_equal(ref, ref + 0.05, gpu)
        assert not _roughly_equal(ref, ref * 1.3, gpu) and not _roughly_equal(ref, ref[:-1], gpu)
        nan = ref.clone()
        nan[3] = float("nan")
        assert _roughly_equal({"return": [nan]}, {"return": [nan.clone()]}, gpu) and not _roughly_equal(nan, ref, gpu)
    huge = torch.tensor([1e300, 1.0], dtype=torch.float64)  # beyond float32: weighed in float64
    assert _roughly_equal(huge, huge.clone(), gpu) and not _roughly_equal(huge, huge * 2, gpu)


def test_a_malformed_or_failed_report_is_no_verdict(tmp_path):
    assert not verdict(tmp_path, {"calls": "nope"}, ["v1"]).ok
    failed = screen_result(JobOutcome("timeout", None, "timed out after 60 s"), ["v1"], tmp_path, RuntimeFacts(), None,
                           EvalOptions())  # fmt: skip
    assert not failed.ok and "timed out" in failed.message
    error = verdict(tmp_path, {"error": "the reference failed on its own captured call: boom"}, ["v1"])
    assert not error.ok and "boom" in error.message


def test_the_plan_and_the_halving_rule():
    plan = ScreenPlan(30.0, 2)
    assert ScreenPlan.from_dict(plan.to_dict()) == plan
    with pytest.raises(ValueError):
        ScreenPlan.from_dict({**plan.to_dict(), "finalists": 0})
    with pytest.raises(ValueError):
        ScreenPlan.from_dict({**plan.to_dict(), "compile_workers": 1000})
    assert [survivors(n, 2) for n in (40, 9, 4, 3, 2, 1)] == [20, 5, 2, 2, 2, 1]
    with pytest.raises(ValueError, match="unknown screened variant"):
        screen_output_file("../x", 0)


def test_a_call_some_variant_cannot_replay_in_a_graph_is_timed_flushed_for_every_variant():
    """A variant's flushed call (cold L2, its launches in its time) ranked against the others' graph replays screens
    slower than it is: the calls whose timers differ in method are the ones the job times alike."""
    from types import SimpleNamespace

    from geak.evaluator.job.screening import _unlike_calls

    def timers(*methods):
        return [SimpleNamespace(method=m) for m in methods]

    same = {"reference": timers("cuda-graph", "flushed"), "v1": timers("cuda-graph", "flushed")}
    assert _unlike_calls(same) == []
    mixed = {**same, "v2": timers("flushed", "flushed")}
    assert _unlike_calls(mixed) == [0]


def test_the_note_says_which_calls_were_timed_flushed_for_every_variant(tmp_path):
    for run in ("", "again"):
        write(tmp_path, "reference", 0, torch.arange(8.0), run)
    write(tmp_path, "v1", 0, torch.arange(8.0))
    result = report({"v1": {"status": "ok", "samples": [0.5], "rung": 1}})
    result["timing"]["flushed_alike"] = [0]
    message = verdict(tmp_path, result, ["v1"]).message
    assert "call(s) 1 timed with the L2 flushed for every variant" in message


@pytest.mark.skipif(not torch.cuda.is_available(), reason="timing needs a GPU")
def test_on_a_gpu_a_variant_that_refuses_the_graph_is_ranked_against_flushed_calls_only(tmp_path):
    """The test's call (3000 floats) is replayed in graphs; a variant whose wrapper synchronizes cannot be captured,
    so that call is timed flushed for the reference and every variant."""
    small = tmp_path / "add_small.py"
    small.write_text(SOURCE.split("\n\ndef bench_add")[0] + "\n")
    wider = small.read_text().replace("BLOCK=256)", "BLOCK=512)").replace("cdiv(n, 256)", "cdiv(n, 512)")
    alloc = "    out = torch.empty_like(x)\n"
    syncing = wider.replace(alloc, "    torch.cuda.synchronize()\n" + alloc)

    async def go():
        async with Evaluator(EvalOptions(timeout_s=120, spares=0)) as ev:
            return await ev.screen(small, [wider, syncing], deadline_s=60)

    result = asyncio.run(go())
    assert result.ok and result.timed, result.message
    assert "call(s) 1 timed with the L2 flushed for every variant" in result.message
    assert [v.status for v in result.variants] == ["ok", "ok"]
    assert all(v.screen_ms is not None for v in result.variants)


def test_a_variant_dropped_at_the_first_rung_is_compared_with_the_references_samples_of_that_rung(tmp_path):
    """The reference races in every rung: a variant dropped after the first is compared with the reference's first
    samples, not with its median over later rungs where the device ran at another pace (here twice as fast)."""
    for run in ("", "again"):
        write(tmp_path, "reference", 0, torch.arange(8.0), run)
    for label in ("v1", "v2"):
        write(tmp_path, label, 0, torch.arange(8.0))
    variants = {
        "v1": {"status": "ok", "samples": [0.95, 0.95, 0.95], "rung": 1},
        "v2": {"status": "ok", "samples": [0.9, 0.9, 0.9, *[0.45] * 6], "rung": 2},
    }
    result = verdict(tmp_path, report(variants, reference_samples=[1.0] * 3 + [0.5] * 6), ["v1", "v2"])
    dropped, kept = result.variants
    assert result.reference_ms == pytest.approx(0.5)
    assert dropped.baseline_ms == pytest.approx(1.0) and result.ratio_of(dropped) == pytest.approx(0.95)
    assert kept.baseline_ms == pytest.approx(0.5) and result.ratio_of(kept) == pytest.approx(0.9)
