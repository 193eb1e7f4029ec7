"""Isolation by the operating system (CPU interpreter): hostile candidates (``fixtures/hostile/``) try to steal the
API key, reach the reference, stop the fork server, leave a daemon, forge the caller's output and poison the peaks
cache; each test checks on the host that the harm did not happen. Also: the sandbox is really on, both mechanisms
(bubblewrap + per-job namespaces, per-job namespaces alone) work, and "process only" is said when it is off."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from geak.evaluator.api import EvalOptions, Evaluator
from geak.evaluator.isolation import default_policy, job_environment
from geak.evaluator.pool import WorkerPool
from geak.evaluator.results import CheckResult
from geak.evaluator.shared.isolation_policy import PROCESS_ONLY

FIXTURES = Path(__file__).parent / "fixtures"
HOSTILE = FIXTURES / "hostile"
SECRET = "sk-geak-isolation-test-" + uuid.uuid4().hex
NAMESPACES = ("namespaces", "bwrap + namespaces")


class Session:
    """One Evaluator, kept warm across tests on an event loop of its own."""

    def __init__(self, options: EvalOptions, pool_args: dict[str, Any]):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

        async def make() -> Evaluator:
            return Evaluator(options, WorkerPool(backend="interpreter", isolation=options.isolation, **pool_args))

        self.evaluator = self.call(make())

    def call(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=600)

    def check(self, source: str, against: Path | None = None) -> CheckResult:
        return self.call(self.evaluator.check(source=source, against=against))

    def zygote_pid(self) -> int:
        (zygote,) = self.evaluator.pool._idle
        return zygote.pid

    def close(self) -> None:
        self.call(self.evaluator.aclose())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()


class Host:
    """What the hostile code must not reach: the key in the environment (of the caller and of a long-lived
    "caller" process started with it), a loopback listener, the reference file, the peaks cache, the home."""

    def __init__(self, root: Path):
        self.root = root
        self.home = root / "home"
        self.peaks = self.home / ".cache" / "geak" / "peaks.json"
        self.peaks.parent.mkdir(parents=True)
        self.peaks.write_text(json.dumps({"v2|cpu": {"bandwidth_gbps": 100.0}}))
        self.reference = root / "project" / "add_native.py"
        self.reference.parent.mkdir()
        shutil.copy(FIXTURES / "add_native.py", self.reference)
        self.caller_output = root / "caller.out"
        env = {**os.environ, "OPENAI_API_KEY": SECRET}
        with open(self.caller_output, "wb") as out:
            self.caller = subprocess.Popen(["sleep", "600"], env=env, stdout=out, stderr=out)
        self.received: list[bytes] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._listen, daemon=True).start()

    def _listen(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                self.received.append(conn.recv(4096))

    def close(self) -> None:
        self.caller.kill()
        self.caller.wait()
        self.listener.close()


@pytest.fixture(scope="module")
def host(tmp_path_factory) -> Iterator[Host]:
    host = Host(tmp_path_factory.mktemp("host"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENAI_API_KEY", SECRET)
        mp.setenv("HOME", str(host.home))
        mp.delenv("GEAK_CACHE_DIR", raising=False)
        yield host
    host.close()


@pytest.fixture(scope="module")
def session(host: Host) -> Iterator[Session]:
    session = Session(EvalOptions(backend="interpreter", timeout_s=60, fresh_inputs=False), {})
    yield session
    session.close()


def hostile(name: str, **params: Any) -> str:
    """The text of a hostile fixture with its targets filled in."""
    text = (HOSTILE / f"{name}.py").read_text()
    return text.replace('json.loads("{}")', f"json.loads({json.dumps(json.dumps(params))})")


def reported_sandbox(result: CheckResult) -> dict[str, Any]:
    line = next(line for line in result.output_tail.splitlines() if line.startswith("SANDBOX "))
    return json.loads(line.removeprefix("SANDBOX "))


def process_state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def processes_running(argument: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argument.encode() in argv and process_state(int(entry.name)) != "Z":
                found.append(int(entry.name))
    return found


# ------------------------------------------------------------------------------------------ the sandbox is on


def test_a_job_sees_only_itself_its_scratch_and_lo(session: Session, host: Host):
    result = session.check(hostile("report_sandbox"))
    assert result.ok, result.message
    assert result.isolation in NAMESPACES
    assert not any("isolation" in c for c in result.caveats)
    seen = reported_sandbox(result)
    assert seen["pid"] == 1 and seen["processes"] == [1]
    assert seen["interfaces"] == ["lo"]
    assert "OPENAI_API_KEY" not in seen["environ"] and not any(v.startswith("GEAK_") for v in seen["environ"])
    assert Path(seen["cwd"]).name.startswith("job") and not seen["root_writable"]
    # In /tmp only the ways to its own scratch directory, to its (empty, private) home and to the Python environment
    # (the zygote's neutral link to it), wherever the checkout is: none named after the evaluator.
    ways = {Path(seen[key]).parts[2] for key in ("cwd", "prefix") if seen[key].startswith("/tmp/")}
    assert set(seen["tmp"]) <= {*ways, Path(os.environ["HOME"]).parts[2]}
    assert not [name for name in seen["tmp"] if "geak" in name.lower()]


def test_a_kernel_that_looks_for_the_evaluator_does_not_see_it(session: Session, host: Host):
    """`add_when_evaluated.py` adds only where it finds `geak` in its modules, paths, import hooks, arguments,
    environment, working directory, temporary directory or open files, and subtracts elsewhere."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("add_when_evaluated", FIXTURES / "probes" / "add_when_evaluated.py")
    here = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(here)
    assert here.evaluated()  # in the caller's process it sees GEAK at once
    result = session.check((FIXTURES / "probes" / "add_when_evaluated.py").read_text(), against=host.reference)
    assert not result.ok and result.stage == "exec", result.message
    assert "not close" in result.message, result.message  # the reference's test: it subtracted


def test_the_environment_is_an_allowlist():
    env = job_environment(
        {
            "PATH": "/bin",
            "OPENAI_API_KEY": "k",
            "GEAK_BACKEND": "gpu",
            "AWS_SECRET_ACCESS_KEY": "s",
            "CUDA_VISIBLE_DEVICES": "0",
            "LC_ALL": "C",
            "TRITON_CACHE_DIR": "/shared",
        }
    )
    assert env == {"PATH": "/bin", "CUDA_VISIBLE_DEVICES": "0", "LC_ALL": "C"}


def test_the_policy_hides_home_tmp_project_and_evaluator_but_shows_python(host: Host, tmp_path: Path):
    import site
    import sys

    import geak.evaluator

    policy = default_policy()
    for private in (str(host.home), "/tmp", os.path.realpath(os.getcwd())):
        assert any(private == h or private.startswith(h + "/") for h in policy.hidden), private
    for path in policy.exposed:
        assert any(path.startswith(h + "/") for h in policy.hidden)
    assert all(os.path.isdir(p) for p in policy.exposed)
    shown = lambda path: not any(path.startswith(h + "/") for h in policy.hidden) or any(
        path == p or path.startswith(p + "/") for p in policy.exposed
    )
    assert all(shown(os.path.realpath(p)) for p in site.getsitepackages())
    package = os.path.dirname(os.path.realpath(geak.evaluator.__file__))  # job processes run the zygote's copy
    assert not shown(package) or not any(package.startswith(h + "/") for h in default_policy().hidden)
    link = tmp_path / "py"  # the zygote's neutral link to the Python environment (job_package)
    link.symlink_to(sys.prefix)
    through = default_policy(python_home=str(link))
    assert str(link) in through.exposed and os.path.realpath(sys.prefix) not in through.exposed



def test_a_project_that_lies_in_a_shown_repository_is_shown_with_it(tmp_path: Path):
    """`geak check` run inside the repository whose module it checks: the working directory is not hidden, or the
    repository (shown read-only) would be an empty folder to its jobs."""
    project = os.path.realpath(os.getcwd())
    hiding = lambda policy: any(project == h or project.startswith(h + "/") for h in policy.hidden)
    showing = lambda policy: any(project == p or project.startswith(p + "/") for p in policy.exposed)
    inside = default_policy(shown=[project])
    assert not hiding(inside) or showing(inside)
    assert hiding(default_policy(shown=[str(tmp_path)]))  # a repository elsewhere: the project stays hidden


# ------------------------------------------------------------------------------------------ attacks


def test_the_key_cannot_be_read_or_leaked(session: Session, host: Host):
    drops = [host.home / "leaked", host.root / "leaked", Path(os.getcwd()) / "leaked-by-candidate"]
    try:
        result = session.check(hostile("steal_key", port=host.port, drop_files=[str(p) for p in drops]))
        assert result.ok, result.message
        assert SECRET not in json.dumps(result.to_dict())
        assert "LEAKED" not in result.output_tail
        assert [p for p in drops if p.exists()] == []
        assert host.received == []
    finally:
        for path in drops:
            path.unlink(missing_ok=True)


def test_the_reference_and_its_outputs_are_out_of_reach(session: Session, host: Host):
    before = host.reference.read_bytes()
    result = session.check(hostile("reach_reference", reference=str(host.reference)), against=host.reference)
    assert result.ok, result.message
    assert "LOOTED" not in result.output_tail and "REWROTE" not in result.output_tail
    assert host.reference.read_bytes() == before
    wrong = session.check((FIXTURES / "wrong_output.py").read_text(), against=host.reference)
    assert not wrong.ok and wrong.stage == "exec", "the reference outputs were tampered with"


def test_the_fork_server_and_the_caller_cannot_be_signalled(session: Session, host: Host):
    zygote = session.zygote_pid()
    result = session.check(hostile("stop_zygote", pids=[zygote, host.caller.pid]))
    assert result.ok, result.message
    assert "SIGNALLED" not in result.output_tail
    assert process_state(zygote) not in ("T", "t", "Z") and process_state(host.caller.pid) not in ("T", "t", "Z")
    after = session.check(hostile("report_sandbox"))
    assert after.ok and session.zygote_pid() == zygote


def test_no_daemon_outlives_its_check(session: Session):
    marker = f"{uuid.uuid4().int % 10**6}.{uuid.uuid4().int % 10**6}"
    result = session.check(hostile("daemon", marker=marker))
    assert result.ok, result.message
    assert processes_running(marker) == []


def test_the_callers_output_cannot_be_forged(session: Session, host: Host, capfd):
    marker = uuid.uuid4().hex
    result = session.check(hostile("caller_output", marker=marker, pids=[os.getpid(), host.caller.pid]))
    assert result.ok, result.message
    captured = capfd.readouterr()
    assert marker not in captured.out + captured.err
    assert marker not in host.caller_output.read_text()


def test_the_peaks_cache_cannot_be_poisoned(session: Session, host: Host):
    before = host.peaks.read_bytes()
    result = session.check(hostile("poison_peaks", peaks=str(host.peaks)))
    assert result.ok, result.message
    assert host.peaks.read_bytes() == before


# ------------------------------------------------------------------------------------------ mechanisms


@pytest.mark.parametrize("bwrap", [False, True], ids=["unshare", "bwrap"])
def test_both_mechanisms_isolate(host: Host, bwrap: bool):
    if bwrap and shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed (scripts/setup.sh installs it where it can)")
    session = Session(EvalOptions(backend="interpreter", timeout_s=60, fresh_inputs=False), {"bwrap": bwrap})
    try:
        result = session.check(hostile("report_sandbox"))
        assert result.ok, result.message
        assert result.isolation == ("bwrap + namespaces" if bwrap else "namespaces")
        seen = reported_sandbox(result)
        assert seen["pid"] == 1 and seen["interfaces"] == ["lo"] and not seen["root_writable"]
        wrong = session.check((FIXTURES / "wrong_output.py").read_text(), against=host.reference)
        assert not wrong.ok and wrong.stage == "exec"
    finally:
        session.close()


@pytest.mark.parametrize("bwrap", [False, True], ids=["unshare", "bwrap"])
def test_compilations_kept_between_runs_are_hidden_from_jobs(bwrap: bool):
    """The kept compile cache (``compile_store``) holds the references' compiled code: the fork server reads and
    fills it (under bubblewrap, bound into the home it hides), a job never sees it."""
    if bwrap and shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed (scripts/setup.sh installs it where it can)")
    kept = Path.home() / ".cache" / f"geak-test-kept-{uuid.uuid4().hex}"  # in the home, as by default
    try:
        options = EvalOptions(backend="interpreter", timeout_s=60, fresh_inputs=False)
        session = Session(options, {"bwrap": bwrap, "compile_cache": str(kept)})
        try:
            result = session.check(hostile("report_sandbox", paths=[str(kept), str(kept.parent)]))
            assert result.ok, result.message
            assert reported_sandbox(result)["seen"] == {str(kept): False, str(kept.parent): False}
            assert [p for p in kept.iterdir() if p.is_dir()], "the fork server made no runtime folder in it"
        finally:
            session.close()
        assert kept.is_dir()  # it outlives the pool
    finally:
        shutil.rmtree(kept, ignore_errors=True)


def test_process_only_is_said_and_the_environment_still_reduced(host: Host):
    session = Session(EvalOptions(backend="interpreter", timeout_s=60, fresh_inputs=False, isolation="process"), {})
    try:
        result = session.check(hostile("report_sandbox"))
        assert result.ok, result.message
        assert result.isolation == PROCESS_ONLY
        assert any(c.startswith(f"isolation: {PROCESS_ONLY}") for c in result.caveats)
        seen = reported_sandbox(result)
        assert seen["pid"] != 1 and "OPENAI_API_KEY" not in seen["environ"]
    finally:
        session.close()


def test_folders_on_pythonpath_stay_visible_read_only(monkeypatch, tmp_path):
    site_dir = tmp_path / "site"  # under /tmp, which is hidden
    site_dir.mkdir()
    monkeypatch.setenv("PYTHONPATH", f"{site_dir}{os.pathsep}")
    policy = default_policy()
    real = os.path.realpath(site_dir)
    assert any(real == p or real.startswith(p + "/") for p in policy.exposed)


@pytest.mark.parametrize("user_ns", [False, True], ids=["pid-namespace-fork", "user-namespace"])
def test_each_way_of_confining_gives_pid_1_lo_and_a_writable_scratch_only(tmp_path, user_ns: bool):
    """The path a root caller takes (no user namespace, forked straight into a PID namespace) and the one a normal
    user takes (a user namespace mapped to the caller, one more fork), each in a throw-away process."""
    from geak.evaluator.job.namespaces import JobForker, _in_probe_process, _probe_once

    scratch = tmp_path / "job"
    scratch.mkdir()
    forker = JobForker(user_ns)
    try:
        answer = _in_probe_process(
            lambda: _probe_once(default_policy(), str(scratch), True, user_ns, lambda: None), forker
        )
    finally:
        forker.close()
    assert answer == "ok"
    assert (scratch / "probe").read_text() == "ok"  # written from inside, read from the host side
