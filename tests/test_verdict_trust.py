"""Verdicts that hold on real files and against hostile candidates (CPU, Triton's interpreter): seeding, fresh
probes that keep their inputs' structure and are used only where the reference agrees with itself, ghost replay,
and a trusted side that expects every output the reference produced."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
import torch
from fixture_check import FIXTURES, check_fixture

from geak.evaluator import reference_runs
from geak.evaluator.api import EvalOptions, Evaluator
from geak.evaluator.compare import UnreadableOutput, load_output
from geak.evaluator.job.capture import CallRecorder, draw_probe, probe_tensors, rebuild_probe
from geak.evaluator.redaction import redact, redact_data, register_secret
from geak.evaluator.shared.protocol import output_file_of_test


def check(name: str, against: str | None, **options):
    return check_fixture(name, against, timeout_s=90, **options)


def test_unseeded_golden_file_matches_itself():
    r = check("unseeded_tritonbench.py", "unseeded_tritonbench.py")
    assert r.ok, r.message
    assert r.comparison.compared_outputs == 1 and r.comparison.fresh_calls == 1


def test_another_seed_still_matches_itself():
    same = check("unseeded_tritonbench.py", "unseeded_tritonbench.py", seed=7)
    assert same.ok, same.message


def test_scatter_by_unique_indices_matches_itself_on_fresh_probes():
    r = check("scatter_unique.py", "scatter_unique.py")
    assert r.ok, r.message
    assert r.comparison.fresh_calls == 1 and not [n for n in r.comparison.notes if n.startswith("fresh")]


def test_probe_where_the_reference_disagrees_with_itself_is_skipped_with_a_reason():
    r = check("nondeterministic_probe.py", "nondeterministic_probe.py")
    assert r.ok, r.message
    assert r.comparison.fresh_calls == 0 and r.comparison.probes_skipped == 1
    assert any("different results on the same inputs" in n for n in r.comparison.notes)
    assert "1 probe(s) skipped" in r.message


def test_ghost_replay_catches_a_fallback_that_launches_a_dummy_kernel():
    r = check("fallback_with_dummy_launch.py", "add_native.py")
    assert not r.ok and r.stage == "exec"
    assert any("do not depend on the kernels" in m.message for m in r.comparison.mismatches)


def test_the_reference_itself_passes_ghost_replay():
    r = check("add_native.py", "add_native.py")
    assert r.ok, r.message
    assert not any("ghost" in n for n in r.comparison.notes)


def test_a_forged_result_message_does_not_pass():
    r = check("forge_result.py", "add_native.py")
    assert not r.ok
    assert "reported no result" in r.message


def test_a_forged_report_of_stuck_kernels_only_ends_the_forgers_job():
    """The kernel watch's report (a job's kernels spin) can only end the job that sends it: a candidate that forges
    one, naming whatever it likes, fails as hung at once."""
    r = check("forge_stuck.py", "add_native.py")
    assert not r.ok and r.stage == "call" and r.tests[0].kind == "timeout", r.message
    assert r.message.startswith("hung: the reference: none of its GPU kernels finished for 1 s"), r.message


# ----------------------------------------------------------------------------------------- units


def _record(fn_args: tuple):
    import types

    module = types.ModuleType("m")
    module.f = lambda *a: None
    recorder = CallRecorder(module, ["f"], keep_args="integers")
    recorder.recording = True
    module.f(*fn_args)
    return recorder.calls[0]


def test_a_call_that_raised_is_not_kept_for_replay_or_timing():
    import types

    def f(x):
        assert x.shape[0] % 8 == 0, "the wrapper's own check"
        return x

    module = types.ModuleType("m")
    module.f = f
    recorder = CallRecorder(module, ["f"], keep_args="integers")
    recorder.recording = True
    module.f(torch.zeros(16))
    with pytest.raises(AssertionError):
        module.f(torch.zeros(15))  # e.g. a test case that checks the wrapper refuses a bad shape
    assert [c.signature for c in recorder.calls] == ["f(f32[16])"]


def test_probe_permutes_integers_keeps_sorted_offsets_and_redraws_floats():
    index = torch.randperm(100)
    offsets = torch.tensor([0, 3, 3, 10, 50])
    x = torch.rand(100, 4).t()  # non-contiguous, non-negative
    call = _record((x, index, offsets, 5))
    args, _ = draw_probe(call, seed=123)
    new_x, new_index, new_offsets, n = args
    assert sorted(new_index.tolist()) == list(range(100)) and not torch.equal(new_index, index)
    assert torch.equal(new_offsets, offsets) and n == 5
    assert new_x.stride() == x.stride() and (new_x >= 0).all() and not torch.equal(new_x, x)
    again, _ = draw_probe(call, seed=123)
    assert all(torch.equal(a, b) for a, b in zip(again[:3], args[:3], strict=True))
    rebuilt, _ = rebuild_probe(call.spec, probe_tensors(args, {}), "cpu")
    assert rebuilt[0].stride() == x.stride() and torch.equal(rebuilt[1], new_index) and rebuilt[3] == 5


def test_output_files_are_never_followed_through_links(tmp_path):
    real = tmp_path / "real.pt"
    torch.save(torch.ones(3), real)
    link = tmp_path / "link.pt"
    os.symlink(real, link)
    assert torch.equal(load_output(real), torch.ones(3))
    with pytest.raises(UnreadableOutput):
        load_output(link)
    (tmp_path / "junk.pt").write_bytes(b"not a torch file")
    with pytest.raises(UnreadableOutput):
        load_output(tmp_path / "junk.pt")


def test_output_names_come_from_test_names_and_are_safe():
    assert output_file_of_test("test_add") == "test_add.pt"
    odd = output_file_of_test("tests/x.py::test_a[../../ref1-2]")
    assert "/" not in odd and "[" not in odd and odd.endswith(".pt")
    assert output_file_of_test("test_a[1]") != output_file_of_test("test_a_1_")


def test_secrets_are_scrubbed_from_everything_a_job_sends_back(monkeypatch):
    secret = "sk-geak-test-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    r = check("leaks_secret.py", "add_native.py")
    assert not r.ok
    text = json.dumps(r.to_dict())
    assert secret not in text and "***" in r.message and "***" in r.output_tail


def test_registered_secrets_and_secret_like_variables_are_masked(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-0123456789")
    monkeypatch.setenv("PATH_HINT", "tok-0123456789-not-secret-name")
    register_secret("p4ssw0rd-xyz")
    data = {"msg": "a tok-0123456789 b p4ssw0rd-xyz", "list": ["tok-0123456789"]}
    assert redact_data(data) == {"msg": "a *** b ***", "list": ["***"]}
    assert redact("nothing here") == "nothing here"


def test_autograd_function_entry_points_are_captured_and_objects_compared_by_their_tensors():
    r = check("autograd_entry.py", "autograd_entry.py")
    assert r.ok, r.message
    assert r.comparison.fresh_calls >= 2  # `scale` and `_Scale.apply` (inside `scaled`)


def test_an_autograd_candidate_that_replays_a_cached_output_is_caught_by_probes():
    r = check("autograd_cached.py", "autograd_entry.py")
    assert not r.ok and r.stage == "exec"
    assert any(m.where.startswith("fresh inputs") for m in r.comparison.mismatches)


def test_reference_outputs_that_do_not_reproduce_are_not_compared_but_the_rest_is():
    same = check("unstable_output.py", "unstable_output.py")
    assert same.ok, same.message
    assert any("['racy']" in n and "not compared" in n for n in same.comparison.notes)
    wrong = check("unstable_output_wrong.py", "unstable_output.py")
    assert not wrong.ok and any("['doubled']" in m.where for m in wrong.comparison.mismatches)


def test_a_mismatch_stands_only_where_the_reference_reproduces_itself_in_a_fresh_process(tmp_path):
    reference = FIXTURES / "unstable_across_processes.py"
    wrong_kernel = tmp_path / "unstable_across_processes_wrong.py"
    wrong_kernel.write_text(reference.read_text().replace("* 2.0", "* 2.5"))  # what the reference reproduces differs

    async def go():
        opts = EvalOptions(backend="interpreter", timeout_s=90, spares=0)
        async with Evaluator(opts) as ev:
            said: list[str] = []
            wrong = await ev.check(wrong_kernel, against=reference, progress=said.append)
            same = await ev.check(reference, against=reference)
            return same, wrong, said

    same, wrong, said = asyncio.run(go())
    assert any("is it deterministic?" in s for s in said)  # its two runs in one process agree; a fresh one differs
    wheres = [m.where for m in wrong.comparison.mismatches]
    assert not wrong.ok and any(w.endswith("['doubled']") for w in wheres), wheres
    assert not any("layout" in w for w in wheres), wheres
    assert same.ok, same.message
    assert any("['layout']" in n and "not compared" in n for n in same.comparison.notes)


def test_a_candidate_identical_to_the_reference_is_one_more_run_of_it(monkeypatch, tmp_path):
    """With no reruns of the reference, only the candidate's own run can show that the reference does not reproduce
    an output, and it counts only when the composed program is the reference's byte for byte."""
    monkeypatch.setattr(reference_runs, "REFERENCE_RERUNS", 0)
    reference = FIXTURES / "unstable_across_processes_tritonbench.py"
    twin, commented, wrong = tmp_path / "twin.py", tmp_path / "commented.py", tmp_path / "wrong.py"
    twin.write_text(reference.read_text())  # the same program under another name
    commented.write_text("# the same kernel\n" + reference.read_text())  # harmless, but another program
    wrong.write_text(reference.read_text().replace("* 2.0", "* 2.5"))

    async def go():
        opts = EvalOptions(backend="interpreter", timeout_s=90, spares=0)
        async with Evaluator(opts) as ev:
            other = await ev.check(commented, against=reference)
            same = await ev.check(twin, against=reference)
            bad = await ev.check(wrong, against=reference)
            steady = await ev.check(FIXTURES / "add_tritonbench.py", against=FIXTURES / "add_tritonbench.py")
            return other, same, bad, steady

    other, same, bad, steady = asyncio.run(go())
    assert not other.ok and [m.where for m in other.comparison.mismatches] == ["test_double → return['layout']"]
    assert same.ok, same.message
    assert any("['layout']" in n and "not compared" in n for n in same.comparison.notes)
    wheres = [m.where for m in bad.comparison.mismatches]
    assert not bad.ok and "test_double → return['doubled']" in wheres, wheres
    assert not any("layout" in w for w in wheres), wheres  # what the twin's run showed holds for every candidate
    assert steady.ok and not steady.comparison.notes, steady.message


def test_a_file_that_reads_unwritten_memory_is_checked_unpoisoned_and_says_so():
    alone = check("reads_unwritten_memory.py", None)
    assert alone.ok, alone.message
    assert any("without poisoned allocations" in c for c in alone.caveats)
    itself = check("reads_unwritten_memory.py", "reads_unwritten_memory.py")
    assert itself.ok, itself.message
    assert any("without poisoned allocations" in c for c in itself.caveats)


def test_an_unwritten_output_is_never_retried_without_poisoning():
    r = check("unwritten_output.py", "add_tritonbench.py")
    assert not r.ok and not any("without poisoned" in c for c in r.caveats)


def test_jobs_are_typed_and_a_malformed_one_is_refused():
    from geak.evaluator.check import check_job
    from geak.evaluator.options import EvalOptions as Options
    from geak.evaluator.shared.protocol import CheckJob, job_from_dict
    from geak.evaluator.triton_file import read_triton_file

    owner = read_triton_file(FIXTURES / "add_native.py")
    job = check_job(FIXTURES / "add_native.py", "m", owner, Path("/tmp/x"), Options(seed=7), None)
    typed = job_from_dict(job)
    assert isinstance(typed, CheckJob) and typed.seed == 7 and typed.poison and typed.tests == ["test_add"]
    with pytest.raises(ValueError, match="missing"):
        job_from_dict({k: v for k, v in job.items() if k != "seed"})
    with pytest.raises(ValueError, match="unknown"):
        job_from_dict({**job, "extra": 1})
    with pytest.raises(ValueError, match="kind"):
        job_from_dict({"kind": "rm -rf"})
