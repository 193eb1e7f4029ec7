"""A timing has the device alone: running checks are paused while it measures (their processes stopped, their time
limits moved on), and checks that arrive meanwhile wait for it. A job rerun for lack of memory waits for them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from geak.evaluator import device_share
from geak.evaluator.device_share import TIMED_KINDS, DeviceShare, Hold


class ScriptedClockLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock jumps to its next timer whenever nothing is ready to run: a schedule of sleeps runs
    at once, in the order of its times, however busy the machine is."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0

    def time(self) -> float:
        return self.now

    def _run_once(self) -> None:
        if not self._ready and self._scheduled:
            self.now = max(self.now, self._scheduled[0].when())
        super()._run_once()


def on_scripted_clock(go: Callable[[], Coroutine[Any, Any, Any]], monkeypatch: pytest.MonkeyPatch) -> Any:
    """`go()` run on a `ScriptedClockLoop`, whose clock the device share reads too (how long a hold was paused)."""
    loop = ScriptedClockLoop()
    monkeypatch.setattr(device_share, "time", SimpleNamespace(monotonic=loop.time))
    with asyncio.Runner(loop_factory=lambda: loop) as runner:
        return runner.run(go())


async def logged_job(
    share: DeviceShare, log: list[str], name: str, alone: bool, start_after: float, hold_s: float, pause: bool = True
) -> Hold:
    """A job that holds the device `hold_s` from `start_after`: its start and end, and each stop or go-on of its
    process, in `log`."""
    await asyncio.sleep(start_after)
    async with share.use(alone=alone, pause=pause) as hold:
        hold.attach(lambda stopped: log.append(f"{'stop' if stopped else 'go on'} {name}"))
        log.append(f"+{name}")
        await asyncio.sleep(hold_s)
        log.append(f"-{name}")
    return hold


async def timing_job(share: DeviceShare, log: list[str], name: str, start_after: float, capture_s: float,
                     measure_s: float) -> Hold:  # fmt: skip
    """A timing job from `start_after`: shares the device while it captures its calls (`capture_s`), then measures
    with it alone (`measure_s`); the start of each step and the end of its measuring in `log`."""
    await asyncio.sleep(start_after)
    async with share.use(alone=False) as hold:
        log.append(f"+capture {name}")
        await asyncio.sleep(capture_s)
        await hold.go_alone()
        log.append(f"+{name}")
        await asyncio.sleep(measure_s)
        log.append(f"-{name}")
    return hold


def test_a_timing_pauses_running_checks_and_goes_before_later_ones(monkeypatch):
    async def go() -> tuple[list[str], dict[str, float]]:
        share, log = DeviceShare(), []
        jobs = {"check1": (False, 0.0, 0.15), "check2": (False, 0.0, 0.20), "bench": (True, 0.02, 0.05),
                "check3": (False, 0.04, 0.01)}  # check3 arrives while the timing measures: goes after it  # fmt: skip
        holds = await asyncio.gather(*(logged_job(share, log, name, *how) for name, how in jobs.items()))
        return log, {name: hold.paused_s() for name, hold in zip(jobs, holds, strict=True)}

    log, paused = on_scripted_clock(go, monkeypatch)
    assert log.index("+bench") < min(log.index("-check1"), log.index("-check2"))  # did not wait for them
    assert {log[log.index("+bench") - 1], log[log.index("+bench") - 2]} == {"stop check1", "stop check2"}
    assert log[log.index("-bench") + 1 : log.index("-bench") + 3] in (["go on check1", "go on check2"],
                                                                      ["go on check2", "go on check1"])  # fmt: skip
    assert log.index("+check3") > log.index("-bench")
    assert 0.04 < paused["check1"] < 0.15 and 0.04 < paused["check2"] < 0.15, paused
    assert paused["bench"] == paused["check3"] == 0.0


def test_a_job_rerun_for_lack_of_memory_waits_for_the_sharers_to_end(monkeypatch):
    async def go() -> list[str]:
        share, log = DeviceShare(), []
        await asyncio.gather(
            logged_job(share, log, "check1", False, 0.0, 0.05, pause=False),
            logged_job(share, log, "check2", False, 0.0, 0.10, pause=False),
            logged_job(share, log, "rerun", True, 0.02, 0.05, pause=False),
            logged_job(share, log, "check3", False, 0.04, 0.01, pause=False),  # arrives while the rerun waits
        )
        return log

    log = on_scripted_clock(go, monkeypatch)
    assert log.index("+rerun") > max(log.index("-check1"), log.index("-check2"))
    assert log.index("+check3") > log.index("-rerun")
    assert log.index("-rerun") == log.index("+rerun") + 1  # nothing ran during it
    assert not any(entry.startswith("stop") for entry in log)


def test_a_sharer_paused_before_its_process_starts_is_stopped_as_it_starts():
    async def go() -> list[str]:
        share, log = DeviceShare(), []
        started, timing_in = asyncio.Event(), asyncio.Event()

        async def check() -> None:
            async with share.use(alone=False) as hold:
                started.set()
                await timing_in.wait()  # its job process starts only now, while the timing measures
                hold.attach(lambda stopped: log.append("stop" if stopped else "go on"))
                log.append(f"attached, paused: {hold.paused}")
                hold.detach()  # its result read: a stopped job goes on, to exit
                log.append("detached")

        async def timing() -> None:
            await started.wait()
            async with share.use(alone=True):
                timing_in.set()
                await asyncio.sleep(0.02)
                log.append("timed")

        await asyncio.gather(check(), timing())
        return log

    assert asyncio.run(go()) == ["stop", "attached, paused: True", "go on", "detached", "timed"]


def test_checks_share_the_device():
    async def go() -> int:
        share, inside, most = DeviceShare(), [0], [0]

        async def check() -> None:
            async with share.use(alone=False):
                inside[0] += 1
                most[0] = max(most[0], inside[0])
                await asyncio.sleep(0.02)
                inside[0] -= 1

        await asyncio.gather(*(check() for _ in range(4)))
        return most[0]

    assert asyncio.run(go()) == 4
    assert {"bench", "screen", "peaks", "profile"} == TIMED_KINDS


def test_why_a_job_runs_again_alone_is_said():
    from geak.evaluator.device_share import why_it_runs_again

    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    assert "queued work" in why_it_runs_again({"error": "the GPU stayed busy", "device_busy": True}, timed=True)
    assert "out of GPU memory" in why_it_runs_again({"error": "x", "error_detail": {"message": oom}}, timed=True)
    assert "out of GPU memory" in why_it_runs_again({"tests": [{"kind": "error", "message": oom}]}, timed=False)
    assert why_it_runs_again({"error": "a call failed while it was timed"}, timed=True) is None
    assert why_it_runs_again({"device_busy": True}, timed=False) is None  # a check is never stopped for a drain
    assert why_it_runs_again(None, timed=True) is None


def test_out_of_device_memory_is_read_from_tests_probes_and_the_import():
    from geak.evaluator.device_share import out_of_device_memory

    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 6.00 GiB"
    assert out_of_device_memory({"tests": [{"name": "t", "kind": "error", "message": oom}]})
    assert out_of_device_memory({"tests": [], "fresh": [{"status": "error", "message": oom}]})
    assert out_of_device_memory({"import_error": {"message": "HIP out of memory"}})
    assert not out_of_device_memory({"tests": [{"name": "t", "kind": "assert", "message": "3 != 4"}]})
    assert not out_of_device_memory(None)


def test_a_job_out_of_device_memory_runs_once_more_alone_only_where_jobs_share_the_device():
    from pathlib import Path

    from geak.evaluator.api import EvalOptions, Evaluator

    async def jobs_for(max_concurrent: int) -> tuple[int, str]:
        options = EvalOptions(backend="interpreter", timeout_s=60, spares=0, max_concurrent=max_concurrent)
        async with Evaluator(options) as ev:
            result = await ev.check(Path(__file__).parent / "fixtures" / "out_of_device_memory.py")
            return ev.pool.jobs_run, result.message

    shared, message = asyncio.run(jobs_for(2))
    alone, _ = asyncio.run(jobs_for(1))
    assert "out of memory" in message
    assert shared == 2 * alone


def test_a_gpu_id_counts_among_the_gpus_the_caller_sees(monkeypatch):
    import pytest

    from geak.evaluator.pool import WorkerPool, pin_device
    from geak.evaluator.zygote import WorkerStartError

    assert pin_device({}, 1) == {"CUDA_VISIBLE_DEVICES": "1", "HIP_VISIBLE_DEVICES": "1"}
    assert pin_device({"CUDA_VISIBLE_DEVICES": "2,3"}, 0) == {"CUDA_VISIBLE_DEVICES": "2"}
    assert pin_device({"CUDA_VISIBLE_DEVICES": "2, 3"}, 1) == {"CUDA_VISIBLE_DEVICES": "3"}
    rocm = {"ROCR_VISIBLE_DEVICES": "1", "CUDA_VISIBLE_DEVICES": "0", "HIP_VISIBLE_DEVICES": "0"}
    assert pin_device({"HIP_VISIBLE_DEVICES": "1,0"}, 0, hip=True) == rocm  # ROCm: pinned through its own mask
    # a CUDA build does not read HIP_VISIBLE_DEVICES: one left over from a ROCm setup hides nothing
    both = {"CUDA_VISIBLE_DEVICES": "0", "HIP_VISIBLE_DEVICES": "0"}
    assert pin_device({"HIP_VISIBLE_DEVICES": ""}, 0, hip=False) == both
    assert pin_device({"CUDA_VISIBLE_DEVICES": "GPU-5a1c,GPU-77b2"}, 1) == {"CUDA_VISIBLE_DEVICES": "GPU-77b2"}
    with pytest.raises(WorkerStartError, match="GPU 2 is not visible: CUDA_VISIBLE_DEVICES=3 shows 1 GPU"):
        pin_device({"CUDA_VISIBLE_DEVICES": "3"}, 2)
    with pytest.raises(WorkerStartError, match="GPU 0 is not visible: CUDA_VISIBLE_DEVICES= shows 0 GPU"):
        pin_device({"CUDA_VISIBLE_DEVICES": ""}, 0)  # set but empty: CUDA shows no GPU, so neither does GEAK
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with pytest.raises(WorkerStartError, match="not visible"):
        WorkerPool(gpu_id=5, spares=0)


def test_a_sharer_that_goes_alone_pauses_the_others_and_holds_newcomers_back(monkeypatch):
    async def go() -> list[str]:
        share, log = DeviceShare(), []
        await asyncio.gather(
            logged_job(share, log, "check1", False, 0.0, 0.08),
            timing_job(share, log, "timed", 0.0, 0.02, 0.03),
            logged_job(share, log, "check2", False, 0.04, 0.01),  # arrives while the timing measures
        )
        return log

    log = on_scripted_clock(go, monkeypatch)
    assert log.index("+capture timed") < log.index("-check1")  # captured beside a running check
    assert log.index("stop check1") < log.index("+timed") < log.index("-timed") < log.index("go on check1")
    assert log.index("+check2") > log.index("-timed")  # a check that arrived meanwhile waited
    assert log.index("-timed") == log.index("+timed") + 1


def test_the_jobs_in_a_timings_way_hold_back_every_spell_alone_but_not_the_checks(monkeypatch):
    """A timing whose spell found the paused jobs' work still running (a kernel that runs on while its process is
    stopped) runs once more after they have ended; meanwhile checks still start, and a later timing does not pause
    them all only to meet the same work. The rerun then waits for the jobs sharing the device at that moment."""

    async def go() -> list[str]:
        share, log = DeviceShare(), []

        async def timing() -> None:
            hold = await timing_job(share, log, "timed", 0.02, 0.0, 0.02)  # the endless check's kernel runs on
            share.in_the_way(hold.paused_others)  # as the pool does before the rerun (DeviceStillBusy)
            await logged_job(share, log, "rerun", True, 0.0, 0.02, pause=False)

        await asyncio.gather(
            logged_job(share, log, "endless", False, 0.0, 0.40),
            timing(),
            logged_job(share, log, "newcomer", False, 0.08, 0.05),  # arrives once the endless check is in the way
            timing_job(share, log, "timed later", 0.10, 0.0, 0.01),
        )
        return log

    log = on_scripted_clock(go, monkeypatch)
    assert log.index("stop endless") < log.index("+timed") < log.index("-timed") < log.index("go on endless")
    assert log.index("+newcomer") < log.index("-endless")  # not held back behind the rerun
    assert log.index("+timed later") > log.index("-endless") and log.index("+rerun") > log.index("-endless")
    assert log.index("+rerun") > log.index("-newcomer")  # then it waited for those sharing the device
    assert log.index("-rerun") == log.index("+rerun") + 1


def _jobs(tmp_path, go: Path | None = None):
    """A check whose test sleeps 3 s (with `go`: waits until that file exists instead), and a timing job of the same
    kernel (whose test's calls it captures)."""
    from interrupts import slow_add_native

    from geak.evaluator.api import EvalOptions
    from geak.evaluator.bench import bench_job
    from geak.evaluator.check import check_job
    from geak.evaluator.shared.sequential import RoundPlan
    from geak.evaluator.triton_file import read_triton_file

    options = EvalOptions(backend="interpreter", timeout_s=60, spares=0, max_concurrent=2, fresh_inputs=False)
    slow = slow_add_native(tmp_path, seconds=3.0)
    check_dir, bench_dir = tmp_path / "check", tmp_path / "bench"
    for d in (check_dir, bench_dir):
        (d / "outputs").mkdir(parents=True)
    owner = read_triton_file(slow)
    waiting = f"while not __import__('os').path.exists({str(go)!r}):\n        time.sleep(0.05)"
    (check_dir / "add_native.py").write_text(slow.read_text().replace("time.sleep(3.0)", waiting if go else
                                                                      "time.sleep(3.0)"))  # fmt: skip
    plain = (Path(__file__).parent / "fixtures" / "add_native.py").read_text()
    (bench_dir / "candidate.py").write_text(plain.split("def bench_add")[0])  # the test's calls are timed
    check = check_job(check_dir / "add_native.py", "m_check", owner, check_dir, options, None)
    module = {"label": "candidate", "path": str(bench_dir / "candidate.py"), "module_name": "m_bench",
              "wrappers": list(owner.entry_points), "kernels": [k.name for k in owner.kernels]}  # fmt: skip
    timed = read_triton_file(bench_dir / "candidate.py")
    bench = bench_job([module], timed, options, bench_dir / "outputs", RoundPlan.fixed(6))
    return options, check, bench


def _timing_beside_a_check(tmp_path, rerun: bool = False) -> tuple[dict[str, float], int]:
    """The timing job starts 0.5 s into the check; when and what each ended with, and the jobs run. `rerun`: the pool
    finds that the first timing needed the device freed (as where the paused check's work did not drain)."""
    import time
    from unittest import mock

    from geak.evaluator import pool as pool_module
    from geak.evaluator.api import Evaluator

    options, check, bench = _jobs(tmp_path)
    freed = iter([True, False])

    async def go() -> tuple[dict[str, float], int]:
        marks: dict[str, float] = {}
        async with Evaluator(options) as ev:

            def on_bench(event: dict) -> None:
                if event.get("bench") == "waiting for the device alone":
                    marks.setdefault("bench asks", time.monotonic())

            async def run_check() -> None:
                outcome = await ev.pool.run(check, timeout_s=60)
                marks["check done"] = time.monotonic()
                marks["check passed"] = float(bool(outcome.result and outcome.result.get("tests")))

            async def run_bench() -> None:
                await asyncio.sleep(0.5)  # the check is under way
                outcome = await ev.pool.run(bench, timeout_s=60, on_event=on_bench)
                marks["bench done"] = time.monotonic()
                marks["bench said"] = outcome.result.get("error", "") if outcome.result else outcome.message
                marks["ran again"] = outcome.ran_again
                marks["alone"] = outcome.alone_s

            def why(result, timed):  # the first timing only (a check never asks)
                return "the GPU stayed busy" if timed and rerun and next(freed) else None

            with mock.patch.object(pool_module, "why_it_runs_again", why):
                await asyncio.gather(run_check(), run_bench())
            return marks, ev.pool.jobs_run

    return asyncio.run(go())


def test_a_timing_shares_the_device_again_once_measured_and_says_how_long_it_had_it_alone(monkeypatch):
    """After its rounds, a timing checks its outputs and exits with the device shared again: the paused checks go on
    at once, and may be paused in turn by the next timing."""

    async def go() -> tuple[list[str], float]:
        share, log = DeviceShare(), []

        async def check() -> None:
            async with share.use(alone=False) as hold:
                hold.attach(lambda stopped: log.append("stop check" if stopped else "go on check"))
                await asyncio.sleep(0.2)
            log.append("-check")

        async def timing() -> float:
            await asyncio.sleep(0.02)
            async with share.use(alone=False) as hold:
                await hold.go_alone()
                log.append("measuring")
                await asyncio.sleep(0.05)
                await hold.share_again()
                log.append("checking its outputs")
                await asyncio.sleep(0.05)
                log.append("-timing")
                return hold.alone_s

        _, alone_s = await asyncio.gather(check(), timing())
        return log, alone_s

    log, alone_s = on_scripted_clock(go, monkeypatch)
    assert log == ["stop check", "measuring", "go on check", "checking its outputs", "-timing", "-check"], log
    assert alone_s == pytest.approx(0.05), alone_s  # the measuring, not the checking of its outputs


def test_a_timing_job_captures_beside_a_check_and_measures_with_it_paused(tmp_path):
    """Through the real pool and worker: the timing job's capture overlaps a slow check, and it is granted the device
    while the check still runs, paused (on the CPU the job then says timing needs a GPU, after the grant)."""
    marks, jobs = _timing_beside_a_check(tmp_path)
    assert "timing needs a GPU" in marks["bench said"]
    assert marks["bench asks"] < marks["bench done"] < marks["check done"]
    assert marks["check passed"] and jobs == 2


def test_a_timing_that_needed_the_device_freed_runs_once_more_after_the_checks(tmp_path, caplog):
    import logging

    caplog.set_level(logging.DEBUG, logger="geak.evaluator.device_share")
    marks, jobs = _timing_beside_a_check(tmp_path, rerun=True)
    assert "1 job(s) in the way of a timing" in caplog.text  # the check it paused: no one alone until it ends
    assert "timing needs a GPU" in marks["bench said"]
    assert marks["bench asks"] < marks["check done"] < marks["bench done"]  # the second waited for the check
    assert marks["check passed"] and jobs == 3
    assert marks["ran again"] == "the GPU stayed busy" and marks["alone"] > 0  # said, and both spells counted


def test_a_paused_check_is_stopped_and_its_time_limit_moves_on(tmp_path, caplog):
    """A check with a limit of 4 s, paused for 4 s by a timing half a second after it started, whose test then ends
    (it waits for a file written once the pause is over): its process is stopped meanwhile (state T), and it passes,
    since its limit moved on by the pause. Its end says how long of it was paused (``benchmarks/spell_timeline.py``
    lists such checks)."""
    import logging
    import re

    caplog.set_level(logging.INFO, logger="geak.evaluator.pool")

    from geak.evaluator.api import Evaluator

    go_on = tmp_path / "check" / "go on"
    options, check, _ = _jobs(tmp_path, go=go_on)

    async def go() -> tuple[str, str]:
        async with Evaluator(options) as ev:
            started = asyncio.Event()
            pid: list[int] = []

            def on_event(event: dict) -> None:
                if event.get("event") == "started":
                    pid.append(event["pid"])
                    started.set()

            checking = asyncio.ensure_future(ev.pool.run(check, timeout_s=4, on_event=on_event))
            await started.wait()
            await asyncio.sleep(0.5)
            async with ev.pool._device.use(alone=True):  # as a timing granted the device
                await asyncio.sleep(0.5)
                state = Path(f"/proc/{pid[0]}/stat").read_text().rsplit(")", 1)[1].split()[0]
                await asyncio.sleep(3.5)
            go_on.touch()
            outcome = await checking
            return state, f"{outcome.status}: {outcome.message}"

    state, status = asyncio.run(go())
    assert state == "T", state  # stopped
    assert status == "ok: ", status  # paused past its limit of 4 s: timed out, had the limit not moved on
    ended = re.search(r"a check job of \S+\.py ended in ([\d.]+) s \(([\d.]+) s of it paused\)", caplog.text)
    assert ended and 3.9 < float(ended.group(2)) < float(ended.group(1)), caplog.text


def test_each_spell_alone_is_logged_for_the_spell_timeline(tmp_path):
    """`geak -vv` shows when a GPU goes alone for a timing (how many jobs it paused, how many more wait) and when it
    is shared again; `benchmarks/spell_timeline.py` reads those lines back into each GPU's spells and gaps."""
    import json
    import logging
    import subprocess
    import sys
    from pathlib import Path

    from geak.server.cli.entry import LOG_FORMAT

    path = tmp_path / "eval.log"
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    logger = logging.getLogger("geak.evaluator.device_share")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)

    async def go() -> None:
        share, log = DeviceShare("GPU 3"), []
        jobs = {"check": (False, 0.0, 0.3), "bench1": (True, 0.02, 0.05), "bench2": (True, 0.03, 0.05)}
        await asyncio.gather(*(logged_job(share, log, name, *how) for name, how in jobs.items()))

    try:
        asyncio.run(go())
    finally:
        logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)
        handler.close()
    lines = path.read_text().splitlines()
    assert "DEBUG geak.evaluator.device_share: GPU 3: alone for a job (1 paused, 0 more waiting)" in lines[0], lines
    assert "GPU 3: shared again after" in lines[1] and lines[1].endswith("s alone (1 waiting for it)"), lines
    script = Path(__file__).parents[1] / "benchmarks" / "spell_timeline.py"
    done = subprocess.run([sys.executable, str(script), str(path), "--json"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    timeline = json.loads(done.stdout)
    assert timeline["device"] == "GPU 3" and timeline["spells"] == 2, timeline
    assert timeline["ended_with_one_waiting"] == 1 and timeline["alone_s"] >= 0.09, timeline
    assert timeline["gaps_s"] < 0.05, timeline  # the second timing was waiting: it went alone at once
    assert timeline["short_gaps_s"] == timeline["gaps_s"] and timeline["long_gaps_s"] == [], timeline
    waits = tmp_path / "waits.log"  # spells at 1-2 s, 2.5-3 s, 40-41 s, 41.3-42 s: gaps 0.5 s, 37 s, 0.3 s
    spells_at = ((1000, 2000), (2500, 3000), (40000, 41000), (41300, 42000))
    said = "DEBUG geak.evaluator.device_share: GPU 0:"
    ends = (  # what the pool says at each job's end (``pool._log_end``): a check paused long (a space in its file's
        # name), one ended as hung (the kernel watch), one killed, one short
        "1500 ms INFO geak.evaluator.pool: a check job ended in 1.20 s\n"
        "39000 ms INFO geak.evaluator.pool: a check job of chunk retention.py ended in 60.00 s (30.50 s of it paused)\n"
        "39500 ms INFO geak.evaluator.pool: a check job of spin.py was ended as hung after 20.00 s (6.00 s of it "
        "paused)\n"
        "41500 ms INFO geak.evaluator.pool: a check job was killed at its time limit after 150.00 s (30.00 s of it "
        "paused)\n"
        "42000 ms INFO geak.evaluator.pool: a bench job ended in 3.00 s (9.00 s of it paused)\n"
    )
    stalled = f"3100 ms {said} 2 job(s) in the way of a timing, none alone until they end\n"  # what the 37 s gap was
    spelled = "".join(
        f"{a} ms {said} alone for a job (2 paused, 0 more waiting)\n"
        f"{b} ms {said} shared again after {(b - a) / 1e3} s alone (0 waiting for it)\n"
        for a, b in spells_at
    )
    in_time = sorted((ends + stalled + spelled).splitlines(keepends=True), key=lambda line: int(line.split()[0]))
    waits.write_text("".join(in_time))
    done = subprocess.run([sys.executable, str(script), str(waits)], capture_output=True, text=True)
    assert "37.8 s of gaps" in done.stdout, done.stdout
    assert "0.8 s under 5 s, longer: 37.0 s)" in done.stdout, done.stdout  # a wait apart from the preparations
    assert ("checks paused 5 s or more: 3, the last to end first: killed at its limit at 41.5 s after 150.0 s, 30.0 s "
            "of it paused; spin.py ended as hung at 39.5 s after 20.0 s, 6.0 s of it paused; chunk retention.py ended "
            "at 39.0 s after 60.0 s, 30.5 s of it paused") in done.stdout, done.stdout  # fmt: skip
    assert "timings to end last: at 42.0 s after 3.0 s, 0.0 s of it its own" in done.stdout, done.stdout
    assert ("GPU 0: stalled at 3.1 s, 2 job(s) in the way, none alone for 36.9 s (the last check to end before: "
            "spin.py ended as hung)") in done.stdout, done.stdout  # fmt: skip
    empty = tmp_path / "empty.log"
    empty.write_text("nothing here\n")
    refused = subprocess.run([sys.executable, str(script), str(empty)], capture_output=True, text=True)
    assert refused.returncode == 2 and "no spell" in refused.stderr
