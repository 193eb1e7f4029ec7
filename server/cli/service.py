"""`geak service status|stop`: the warm evaluator services `geak check FILE` and `geak bench FILE` start (one per
build, environment and working directory), and `geak service run`, the service's own process."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from ..service.protocol import IDLE_S
from .ctrl_c import run_work, work_under_way


def register(commands) -> None:
    parser = commands.add_parser(
        "service",
        help="the warm evaluator service behind `geak check` and `geak bench` (status, stop)",
        description="`geak check FILE` and `geak bench FILE` start a service in the background that keeps a "
        "sandboxed worker warm (it holds no GPU memory while idle) and ends after 10 idle minutes. `status` lists "
        "this user's services, `stop` ends them. `--no-service` or GEAK_SERVICE=0 runs a command without one.",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    for action, text in (("status", "list this user's running services"), ("stop", "end this user's running services")):
        actions.add_parser(action, help=text).add_argument("--json", action="store_true", help="print one JSON object")
    run_parser = actions.add_parser("run", help=argparse.SUPPRESS)
    run_parser.add_argument("--socket", required=True, type=Path)
    run_parser.add_argument("--idle", type=float, default=IDLE_S, metavar="S")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    work_under_way()
    if args.action == "run":
        from ..service import server as service

        identity = args.socket.stem.removeprefix("evaluator-")
        return service.run(identity, args.socket, args.idle)
    from ..service.client import request, running_services

    answers = {}
    for path in running_services():
        message = {"method": "stop"} if args.action == "stop" else {"method": "status"}
        answer = run_work(request(path, message))
        if answer is None:  # no one listens: a service that died left it
            path.unlink(missing_ok=True)
            continue
        answers[str(path)] = answer.get("status") or answer
    if args.json:
        print(json.dumps({"services": answers}))
    elif not answers:
        print("no GEAK service is running")
    for path, answer in ([] if args.json else answers.items()):
        if args.action == "stop":
            print(f"stopped {path}")
            continue
        workers = ", ".join(f"{w.get('device', '?')} ({w.get('isolation', '?')})" for w in answer["workers"]) or "none"
        print(f"{path}: pid {answer['pid']}, up {time.time() - answer['since']:.0f} s, {answer['requests']} "
              f"request(s), {answer['active']} running; for {answer['cwd']}; workers: {workers}")  # fmt: skip
    return 0
