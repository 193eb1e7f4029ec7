"""`geak optimize FILE`: the GEAK agent loop (filled in by the agent milestone)."""

from __future__ import annotations


def register(commands) -> None:
    parser = commands.add_parser("optimize", help="optimize a Triton file's kernels")
    parser.add_argument("file")
    parser.set_defaults(run=lambda args: 2)
