"""A scripted OpenAI-compatible chat server on loopback, for tests of code that talks to an LLM.

    def test_something(scripted_llm):
        scripted_llm.reply("```python\\n...\\n```")
        cfg = AgentConfig(model_id="test-model", base_url=scripted_llm.base_url)
        ...
        assert "kernel" in scripted_llm.requests[0]["messages"][-1]["content"]

Replies are served in the order they were queued; a request with nothing queued gets what the `answer_with` responder
makes of it if one is set (a reply built from the request), else the `forever` reply if one is set (a server that
answers 429 forever, say), else HTTP 400 (not retried) and is recorded in `unexpected`, which
the fixture asserts empty at teardown. `raw` queues any body (HTML, broken JSON, a reply without choices).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

CHAT_PATH = "/v1/chat/completions"


@dataclass(frozen=True)
class ScriptedReply:
    text: str | None
    finish_reason: str | None = "stop"
    status: int = 200
    delay_s: float = 0.0
    headers: Mapping[str, str] = field(default_factory=dict)
    usage: tuple[int, int] | None = None
    raw_body: str | None = None  # sent verbatim instead of a chat completion or an error body
    content_type: str = "application/json"
    reasoning_tokens: int | None = None  # reported in usage.completion_tokens_details when set
    cached_tokens: int | None = None  # reported in usage.prompt_tokens_details when set


class ScriptedLLM:
    """Serves queued chat completions at `base_url` + /chat/completions and records each request body."""

    def __init__(self, server: HTTPServer, model: str = "scripted-model"):
        self.server = server
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self.unexpected: list[dict[str, Any]] = []
        self._queue: deque[ScriptedReply] = deque()
        self._forever: ScriptedReply | None = None
        self._responder: Callable[[dict[str, Any]], ScriptedReply] | None = None
        self._lock = threading.Lock()
        server.expect_request(CHAT_PATH, method="POST").respond_with_handler(self._handle)

    @property
    def base_url(self) -> str:
        return self.server.url_for("/v1")

    @property
    def pending(self) -> int:
        """Replies queued but not served yet."""
        return len(self._queue)

    def reply(
        self,
        text: str | None,
        *,
        finish_reason: str | None = "stop",
        status: int = 200,
        delay_s: float = 0.0,
        headers: Mapping[str, str] | None = None,
        usage: tuple[int, int] | None = None,
        reasoning_tokens: int | None = None,
        cached_tokens: int | None = None,
    ) -> ScriptedLLM:
        """Queue the next response. For status 200, `text` is the assistant message content (None allowed)
        and `usage` the (prompt, completion) token counts (default: word counts), with the reasoning and cached
        tokens' details where given; for another status, `text` is the error message. `headers` are added to the
        response (e.g. {"retry-after-ms": "10"})."""
        details = {"reasoning_tokens": reasoning_tokens, "cached_tokens": cached_tokens}
        self._queue.append(ScriptedReply(text, finish_reason, status, delay_s, dict(headers or {}), usage, **details))
        return self

    def raw(self, body: str, *, status: int = 200, content_type: str = "application/json") -> ScriptedLLM:
        """Queue a response whose body is `body` verbatim."""
        self._queue.append(ScriptedReply(None, status=status, raw_body=body, content_type=content_type))
        return self

    def forever(self, text: str | None, *, status: int = 200, raw_body: str | None = None) -> ScriptedLLM:
        """Answer every request that finds the queue empty with this reply (e.g. HTTP 429) from now on."""
        self._forever = ScriptedReply(text, status=status, raw_body=raw_body)
        return self

    def answer_with(self, responder: Callable[[dict[str, Any]], ScriptedReply]) -> ScriptedLLM:
        """Answer every request that finds the queue empty with what `responder` makes of its JSON body."""
        self._responder = responder
        return self

    def _handle(self, request: Request) -> Response:
        body = json.loads(request.get_data(as_text=True) or "null")
        with self._lock:
            self.requests.append(body)
            if self._queue:
                scripted = self._queue.popleft()
            else:
                scripted = self._responder(body) if self._responder is not None else self._forever
        if scripted is None:
            self.unexpected.append(body)
            return _json_response(400, _error_body("ScriptedLLM: no reply queued for this request"), {})
        if scripted.delay_s:
            time.sleep(scripted.delay_s)
        if scripted.raw_body is not None:
            return Response(scripted.raw_body, status=scripted.status, content_type=scripted.content_type)
        if scripted.status != 200:
            return _json_response(scripted.status, _error_body(scripted.text or ""), scripted.headers)
        return _json_response(200, self._completion(body, scripted), scripted.headers)

    def _completion(self, body: dict[str, Any], scripted: ScriptedReply) -> dict[str, Any]:
        if scripted.usage is not None:
            prompt_tokens, completion_tokens = scripted.usage
        else:
            prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
            completion_tokens = len((scripted.text or "").split())
        return {
            "id": f"chatcmpl-scripted-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or self.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": scripted.text},
                    "finish_reason": scripted.finish_reason,
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
                **({"completion_tokens_details": {"reasoning_tokens": scripted.reasoning_tokens}}
                   if scripted.reasoning_tokens is not None else {}),
                **({"prompt_tokens_details": {"cached_tokens": scripted.cached_tokens}}
                   if scripted.cached_tokens is not None else {}),
            },
        }  # fmt: skip


def _error_body(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "scripted_error", "param": None, "code": None}}


def _json_response(status: int, payload: dict[str, Any], headers: Mapping[str, str]) -> Response:
    return Response(
        json.dumps(payload), status=status, headers=dict(headers), content_type="application/json"
    )


@pytest.fixture
def scripted_llm(httpserver: HTTPServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedLLM]:
    """A fresh `ScriptedLLM` on pytest-httpserver's loopback server (never reached through an HTTP proxy);
    fails the test at teardown if a request arrived with no reply queued."""
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(name, ",".join(filter(None, [os.environ.get(name), "localhost", "127.0.0.1"])))
    llm = ScriptedLLM(httpserver)
    yield llm
    assert not llm.unexpected, f"{len(llm.unexpected)} request(s) reached ScriptedLLM with no reply queued"
