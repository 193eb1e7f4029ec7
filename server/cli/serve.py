"""`geak serve`: the language server, on stdio (default) or TCP. Logs go to stderr and `window/logMessage`;
nothing is ever written to stdout except the protocol (fd 1 is pointed at stderr once the server owns a copy)."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from .exits import CommandError, said


def register(commands) -> None:
    parser = commands.add_parser(
        "serve",
        help="run the GEAK language server (stdio by default)",
        description="The language server behind the VS Code extension (any LSP client works): on-save checks, "
        "latency inlay hints, performance hovers and the Optimize-kernel code action.",
    )
    add_arguments(parser)
    parser.set_defaults(run=run)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tcp", metavar="HOST:PORT", help="listen on TCP instead of stdio")
    parser.add_argument("--stdio", action="store_true", help="talk over stdin/stdout (the default)")
    parser.add_argument("--clientProcessId", help=argparse.SUPPRESS)  # sent by some clients; unused


def run(args: argparse.Namespace) -> int:
    from ..lsp.server import LogForwarder, build_server
    from .ctrl_c import work_under_way

    if args.tcp:
        host, _, port = args.tcp.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise CommandError(f"--tcp must be HOST:PORT, not {args.tcp!r}")
    level = logging.INFO if getattr(args, "verbose", False) else logging.WARNING
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setLevel(level)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
    root.setLevel(level)
    logging.getLogger("pygls").setLevel(logging.WARNING)
    server = build_server()
    work_under_way()
    geak_log = logging.getLogger("geak")
    geak_log.setLevel(logging.INFO)
    geak_log.addHandler(LogForwarder(server))
    if args.tcp:
        server.start_tcp(host, int(port))
        return 0
    protocol_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints (ours, a library's, C code's) go to stderr
    sys.stdout = sys.stderr
    server.start_io(sys.stdin.buffer, protocol_out)
    # The server has shut down, its evaluator and workers too. The interpreter's own teardown of torch and the other
    # libraries loaded takes about 2 s, and VS Code's client kills a server still running 2 s after `exit`: skip it.
    logging.shutdown()
    sys.stderr.flush()
    os._exit(0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m geak.server", description="The GEAK language server.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what happens to stderr")
    add_arguments(parser)
    try:
        return run(parser.parse_args(argv))
    except CommandError as e:
        return said("serve", e)
