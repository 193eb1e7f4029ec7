"""When to stop asking a model: the difference between a model that fails now and then and one that cannot be used.

Each request is already retried with backoff by the openai client (`max_retries`); what reaches here is a request
that failed for good (an `LLMError` of some kind). The model is given up (`llm.ModelUnusable`) when:

* the server refused the request itself (authentication, quota used up, unknown model or URL, a malformed
  request): at once;
* the model never answered and its first request failed for want of a server (connection refused, DNS) or because
  what answered does not speak the protocol (HTML, broken JSON, no `choices`): at once;
* `max_failures` requests in a row failed (429 forever, 5xx, time-outs, empty replies...);
* it has not answered for `give_up_s` seconds: counted from its first request while it never answered, else from
  the first failure of the current run of failures. A request in flight is cut at that moment.

A reply resets the count, so a model that fails now and then is simply retried.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

FATAL_KINDS = ("auth", "quota", "not_found", "config", "bad_request")
FIRST_CALL_FATAL_KINDS = ("connection", "protocol")


@dataclass
class ModelHealth:
    max_failures: int = 3
    give_up_s: float = 300.0
    answered: int = 0
    failures_in_a_row: int = 0
    since: float | None = None  # start of the time the model has gone without answering
    given_up: str | None = None  # why the model was given up, once it is

    def request_started(self) -> float:
        """Note a request; returns its start time (time.monotonic)."""
        now = time.monotonic()
        if self.answered == 0 and self.since is None:
            self.since = now
        return now

    def time_left(self) -> float | None:
        """Seconds the request about to be waited for may take before the model is given up; None: no limit."""
        return None if self.since is None else max(0.0, self.since + self.give_up_s - time.monotonic())

    def succeeded(self) -> None:
        self.answered += 1
        self.failures_in_a_row = 0
        self.since = None

    def failed(self, kind: str, started: float) -> str | None:
        """Record a request that failed with an `LLMError` of `kind`; returns why the model is given up, or None."""
        self.failures_in_a_row += 1
        self.since = started if self.since is None else min(self.since, started)
        silent_s = time.monotonic() - self.since
        if kind in FATAL_KINDS:
            reason = "the server refused the request"
        elif self.answered == 0 and kind in FIRST_CALL_FATAL_KINDS:
            reason = "its first request failed"
        elif self.failures_in_a_row >= self.max_failures:
            reason = f"{self.failures_in_a_row} requests failed in a row"
        elif silent_s >= self.give_up_s:
            reason = f"no answer for {silent_s:.0f} s"
        else:
            return None
        self.given_up = reason + (" and it never answered" if self.answered == 0 else "")
        return self.given_up
