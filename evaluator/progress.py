"""What the evaluator says while it works: a caller's progress callback, and the job events relayed to it in words."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Progress = Callable[[str], None]


def say(progress: Progress | None, message: str) -> None:
    if progress is not None:
        progress(message)


def relay(progress: Progress | None) -> Callable[[dict[str, Any]], None] | None:
    """A job's `on_event` that tells `progress` what the job is doing (None where no one listens)."""
    if progress is None:
        return None

    def on_event(event: dict[str, Any]) -> None:
        running = f"running {event.get('test') or 'the file'}"
        if "programs" in event:
            progress(f"{running} ({event['programs']:,} kernel programs interpreted)")
        elif "compiling" in event:
            progress(f"{running}: compiling {event['compiling']}")
        elif "compiled" in event:
            progress(f"{running}: compiled {event['compiled']} in {event.get('compile_s', '?')} s")
        elif "test" in event:
            progress(f"running {event['test']}")
        elif "stage" in event:
            progress(str(event["stage"]))
        elif "bench" in event:
            progress(f"timing {event['bench']}")
        elif "screen" in event:
            progress(f"screening: {event['screen']}")

    return on_event
