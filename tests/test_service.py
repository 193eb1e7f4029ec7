"""The warm evaluator service behind `geak check FILE` and `geak bench FILE`: started by the first command, reused by
the next, private to its user, cancelled with its command, gone when idle or stopped; a command without one still
works."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
ADD = FIXTURES / "add_native.py"


@pytest.fixture
def service_dir():
    """A short path: a Unix socket's path has room for about 100 bytes (pytest's tmp_path can be longer)."""
    folder = Path(tempfile.mkdtemp(prefix="gs", dir="/tmp")) / "svc"
    yield folder
    shutil.rmtree(folder.parent, ignore_errors=True)


@pytest.fixture
def service_env(service_dir):
    env = {**os.environ, "GEAK_SERVICE": "1", "GEAK_SERVICE_DIR": str(service_dir), "GEAK_SERVICE_IDLE_S": "30"}
    yield env
    subprocess.run([sys.executable, "-m", "geak.server.cli", "service", "stop"], env=env, capture_output=True)


def geak(env: dict, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "geak.server.cli", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, cwd=cwd)


def status(env: dict) -> dict:
    return json.loads(geak(env, "service", "status", "--json").stdout)["services"]


def test_the_first_command_starts_the_service_and_the_next_reuses_it(service_env, tmp_path):
    long = {**service_env, "GEAK_SERVICE_DIR": str(tmp_path / ("x" * 90))}  # no room for a socket: no service
    done = geak(long, "-v", "check", str(ADD), "--backend", "interpreter")
    assert done.returncode == 0 and "too long for a Unix socket" in done.stderr
    first = geak(service_env, "check", str(ADD), "--backend", "interpreter", "--json")
    assert first.returncode == 0 and json.loads(first.stdout)["ok"], first.stderr
    # every evaluation option travels to the service (one it did not know made the command fall back unseen)
    second = geak(service_env, "-v", "check", str(ADD), "--backend", "interpreter", "--fresh-inputs-only", "--json")
    assert second.returncode == 0 and json.loads(second.stdout)["ok"]
    # with -v, the service's progress is logged as it comes (each line's time: where a command waits)
    assert "connected to the evaluator service" in second.stderr and "the service: running" in second.stderr
    services = list(status(service_env).values())
    assert len(services) == 1 and services[0]["requests"] == 2 and services[0]["workers"]
    folder = Path(service_env["GEAK_SERVICE_DIR"])
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700  # only its user may reach the socket
    socket = next(folder.glob("*.sock"))
    assert stat.S_IMODE(socket.stat().st_mode) == 0o600
    # bad input is said the same way through the service: one line, exit 2
    bad = geak(service_env, "check", str(tmp_path / "missing.py"), "--backend", "interpreter")
    assert bad.returncode == 2 and "no such file" in bad.stderr
    # a failing file fails (exit 1) with its diagnostics, as without the service
    wrong = geak(service_env, "check", str(FIXTURES / "wrong_output.py"), "--backend", "interpreter", "--json")
    assert wrong.returncode == 1 and json.loads(wrong.stdout)["stage"] == "exec"


def test_a_service_that_fails_to_start_is_said_and_the_command_runs_in_its_own_process(service_env):
    broken = {**service_env, "GEAK_SERVICE_IDLE_S": "never"}  # the service's own arguments refuse it: it ends
    done = geak(broken, "check", str(ADD), "--backend", "interpreter", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["ok"]
    assert "no warm evaluator service: the service ended" in done.stderr  # said without -v


def test_a_dead_services_socket_is_replaced_and_a_live_service_left_alone(service_env, service_dir):
    import socket as sockets

    service_dir.mkdir(mode=0o700, parents=True)
    path = service_dir / "evaluator-test.sock"
    dead = sockets.socket(sockets.AF_UNIX)
    dead.bind(str(path))
    dead.close()  # what a killed service leaves: a socket file no one listens on
    run = [sys.executable, "-m", "geak.server.cli", "service", "run", "--socket", str(path), "--idle", "30"]
    first = subprocess.Popen(run, env=service_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and str(path) not in status(service_env):
            time.sleep(0.2)
        assert status(service_env)[str(path)]["pid"] == first.pid
        second = subprocess.run(run, env=service_env, capture_output=True, text=True, timeout=60)
        assert second.returncode == 0 and "already answers" in second.stderr
        assert status(service_env)[str(path)]["pid"] == first.pid  # still served by the first
    finally:
        first.kill()
        first.wait()


def test_another_working_directory_or_environment_gets_a_service_of_its_own(service_env, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert geak(service_env, "check", str(ADD), "--backend", "interpreter").returncode == 0
    assert geak(service_env, "check", str(ADD), "--backend", "interpreter", cwd=elsewhere).returncode == 0
    env = {**service_env, "TRITON_DEBUG": "0"}  # a variable jobs see
    assert geak(env, "check", str(ADD), "--backend", "interpreter").returncode == 0
    assert len(status(service_env)) == 3
    stopped = geak(service_env, "service", "stop")
    assert stopped.returncode == 0 and stopped.stdout.count("stopped") == 3
    deadline = time.monotonic() + 20
    while status(service_env) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert status(service_env) == {}
    assert "no GEAK service is running" in geak(service_env, "service", "status").stdout


def test_an_idle_service_ends_and_a_command_without_one_still_works(service_env, service_dir):
    env = {**service_env, "GEAK_SERVICE_IDLE_S": "1"}
    assert geak(env, "check", str(ADD), "--backend", "interpreter").returncode == 0
    assert list(service_dir.glob("*.sock"))
    deadline = time.monotonic() + 30
    while list(service_dir.glob("*.sock")) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not list(service_dir.glob("*.sock"))
    plain = geak({**env, "GEAK_SERVICE": "0"}, "check", str(ADD), "--backend", "interpreter", "--json")
    assert plain.returncode == 0 and json.loads(plain.stdout)["ok"]
    no_flag = geak(env, "check", str(ADD), "--backend", "interpreter", "--no-service")
    assert no_flag.returncode == 0 and not list(service_dir.glob("*.sock"))


def test_a_folder_others_can_enter_is_refused_and_the_command_runs_in_its_own_process(service_env, service_dir):
    open_folder = service_dir.parent / "open"
    open_folder.mkdir(mode=0o777)
    open_folder.chmod(0o777)
    env = {**service_env, "GEAK_SERVICE_DIR": str(open_folder)}
    done = geak(env, "check", str(ADD), "--backend", "interpreter")
    assert done.returncode == 0 and "not private to this user" in done.stderr  # said without -v: commands run slower
    assert not list(open_folder.glob("*.sock"))


def test_ctrl_c_in_the_command_cancels_its_job_in_the_service(service_env, tmp_path):
    from interrupts import slow_add_native, start_interruptible

    slow = slow_add_native(tmp_path, seconds=30.0)
    assert geak(service_env, "check", str(ADD), "--backend", "interpreter").returncode == 0  # the service is warm
    command = start_interruptible("check", str(slow), "--backend", "interpreter", env=service_env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(s["active"] for s in status(service_env).values()):
        time.sleep(0.2)
    assert any(s["active"] for s in status(service_env).values())
    command.send_signal(signal.SIGINT)
    assert command.wait(timeout=30) == 130
    deadline = time.monotonic() + 20  # the service drops the request (and kills its job) at once, not in 30 s
    while time.monotonic() < deadline and any(s["active"] for s in status(service_env).values()):
        time.sleep(0.2)
    assert not any(s["active"] for s in status(service_env).values())


def test_where_compilations_are_kept_is_part_of_a_services_identity(tmp_path):
    from geak.server.service.protocol import identity

    base = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)}
    kept = identity({**base, "GEAK_COMPILE_CACHE": str(tmp_path / "a")})
    assert kept == identity({**base, "GEAK_COMPILE_CACHE": str(tmp_path / "a")})
    assert kept != identity({**base, "GEAK_COMPILE_CACHE": str(tmp_path / "b")})
    assert kept != identity({**base, "GEAK_COMPILE_CACHE": "off"})
