"""What a `geak` command exits with, and the one error a command raises to stop: `entry.main` prints it once."""

from __future__ import annotations

import sys

EXIT_OK = 0  # done: the check passed, the timing was made, the run ended
EXIT_FAIL = 1  # the kernel fails its check, or its timing was rejected
EXIT_BAD_INPUT = 2  # bad input or an unusable model or device: nothing was judged
EXIT_NOT_CHECKABLE = 3  # not checkable on this backend (the CPU interpreter says why)
EXIT_INTERRUPTED = 130  # stopped by Ctrl-C


class CommandError(Exception):
    """A command cannot go on. `entry.main` prints `geak COMMAND: message` on stderr (with `--json`, where the command
    answers errors in JSON, one JSON object on stdout instead) and exits with `status`."""

    def __init__(self, message: str, status: int = EXIT_BAD_INPUT, *, json: bool = False):
        super().__init__(message)
        self.status = status
        self.json = json


def said(command: str, error: CommandError) -> int:
    """`error` said once (a line on stderr, or the JSON object of a command that answers in JSON): its exit status."""
    if error.json:
        import json

        print(json.dumps({"ok": False, "error": str(error), "stage": None}))
    else:
        print(f"geak {command}: {error}", file=sys.stderr)
    return error.status
