"""A model that cannot be used is given up quickly and said so; one that fails now and then is retried.

The real `openai` client over real HTTP: the scripted server on loopback plays the bad models (or nothing listens)."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest
from scripted_llm import ScriptedLLM

from geak.agent.config import AgentConfig
from geak.agent.llm import ChatModel, LLMError, ModelUnusable

HELLO = [{"role": "user", "content": "hello"}]


def config(base_url: str, **overrides) -> AgentConfig:
    values = dict(model_id="m", base_url=base_url, max_retries=0, timeout_s=5.0)
    values.update(overrides)
    return AgentConfig(**values)


async def calls(cfg: AgentConfig, n: int) -> list[object]:
    """The outcome (reply text or the exception) of `n` requests in a row."""
    outcomes: list[object] = []
    async with ChatModel(cfg) as model:
        for _ in range(n):
            try:
                outcomes.append((await model.complete(HELLO)).text)
            except LLMError as e:
                outcomes.append(e)
    return outcomes


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_connection_refused_is_given_up_after_the_clients_retries():
    first, second = asyncio.run(calls(config(closed_port_url(), max_retries=2), 2))
    assert isinstance(first, ModelUnusable) and first.kind == "connection"
    assert "cannot connect" in str(first) and "never answered" in str(first)
    assert "gave up after 2 retries" in str(first)  # the client's two retries with backoff, not minutes of them
    assert second is first  # not asked again


def test_rate_limited_forever_is_given_up_after_max_failures(scripted_llm: ScriptedLLM):
    scripted_llm.forever("slow down", status=429)
    outcomes = asyncio.run(calls(config(scripted_llm.base_url, model_max_failures=3), 5))
    assert [type(o) for o in outcomes] == [LLMError, LLMError, ModelUnusable, ModelUnusable, ModelUnusable]
    assert outcomes[2].kind == "rate_limit" and "3 requests failed in a row" in str(outcomes[2])
    assert len(scripted_llm.requests) == 3


def test_quota_used_up_is_given_up_at_once(scripted_llm: ScriptedLLM):
    body = {"error": {"message": "You exceeded your current quota", "type": "x", "code": "insufficient_quota"}}
    scripted_llm.raw(json.dumps(body), status=429)
    (outcome,) = asyncio.run(calls(config(scripted_llm.base_url), 1))
    assert isinstance(outcome, ModelUnusable) and outcome.kind == "quota" and "quota" in str(outcome)


def test_authentication_failure_is_given_up_at_once(scripted_llm: ScriptedLLM):
    scripted_llm.reply("bad key", status=401)
    (outcome,) = asyncio.run(calls(config(scripted_llm.base_url), 1))
    assert isinstance(outcome, ModelUnusable) and outcome.kind == "auth"


@pytest.mark.parametrize(
    ("body", "content_type", "words"),
    [
        ("<html><body>Welcome to nginx!</body></html>", "text/html", "did not answer with a chat completion"),
        ('{"id": "x", "choices": [], "usage": null}', "application/json", "empty `choices` list"),
        ('{"id": "x", choices: [', "application/json", "did not answer with a chat completion"),
    ],
)
def test_a_server_that_does_not_speak_the_protocol_is_given_up(scripted_llm: ScriptedLLM, body, content_type, words):
    scripted_llm.raw(body, content_type=content_type)
    first, second = asyncio.run(calls(config(scripted_llm.base_url), 2))
    assert isinstance(first, ModelUnusable) and first.kind == "protocol" and words in str(first)
    assert second is first and len(scripted_llm.requests) == 1


def test_broken_json_after_answers_is_one_bad_reply(scripted_llm: ScriptedLLM):
    scripted_llm.reply("one")
    scripted_llm.raw('{"id": "x", choices: [')
    scripted_llm.reply("two")
    one, broken, two = asyncio.run(calls(config(scripted_llm.base_url), 3))
    assert one == "one" and two == "two"
    assert type(broken) is LLMError and broken.kind == "protocol"


def test_a_model_that_fails_now_and_then_is_kept(scripted_llm: ScriptedLLM):
    for step in ("ok", 500, "ok", 500, 500, "ok", 429, 503, "ok"):
        if step == "ok":
            scripted_llm.reply("fine")
        else:
            scripted_llm.reply("hiccup", status=step)
    outcomes = asyncio.run(calls(config(scripted_llm.base_url, model_max_failures=3), 9))
    assert not any(isinstance(o, ModelUnusable) for o in outcomes)
    assert outcomes.count("fine") == 4


def test_a_silent_model_is_cut_at_the_give_up_time(scripted_llm: ScriptedLLM):
    scripted_llm.reply("too late", delay_s=4.0)
    (outcome,) = asyncio.run(calls(config(scripted_llm.base_url, model_give_up_s=1.0, timeout_s=30), 1))
    assert isinstance(outcome, ModelUnusable) and outcome.kind == "timeout"  # cut before the reply came, at 4 s
    assert "model_give_up_s=1" in str(outcome)


def test_a_password_in_the_base_url_is_never_shown(scripted_llm: ScriptedLLM):
    url = scripted_llm.base_url.replace("http://", "http://alice:S3CRET-PW@")
    scripted_llm.reply("down", status=500)
    scripted_llm.reply("fine")
    failed, fine = asyncio.run(calls(config(url), 2))
    assert fine == "fine"
    assert "S3CRET-PW" not in str(failed) and "http://***@" in str(failed)
    closed = closed_port_url().replace("http://", "http://alice:S3CRET-PW@")
    (refused,) = asyncio.run(calls(config(closed), 1))
    assert "S3CRET-PW" not in str(refused) and "***@" in str(refused)
