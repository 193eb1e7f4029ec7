"""ChatModel against a real OpenAI-compatible HTTP server on loopback (pytest-httpserver, openai client)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import pytest

from geak.agent.config import AgentConfig
from geak.agent.llm import (
    LOCAL_PLACEHOLDER_KEY,
    ChatModel,
    Endpoint,
    LLMError,
    TokenUsage,
    resolve_endpoint,
)

if TYPE_CHECKING:
    from pytest_httpserver import HTTPServer
    from scripted_llm import ScriptedLLM

SECRET = "sk-test-SECRET-0123456789abcdef"
FAST_RETRY = {"retry-after-ms": "5"}
MESSAGES = [
    {"role": "system", "content": "You write Triton kernels."},
    {"role": "user", "content": "Make it fast please"},
]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "MY_LLM_KEY"):
        monkeypatch.delenv(name, raising=False)


def make_config(llm: ScriptedLLM, **settings) -> AgentConfig:
    return AgentConfig(model_id="test-model", base_url=llm.base_url, **settings)


def run_complete(cfg: AgentConfig, messages=MESSAGES, **kwargs):
    async def go():
        async with ChatModel(cfg) as model:
            return await model.complete(messages, **kwargs), model.usage

    return asyncio.run(go())


def run_failing(cfg: AgentConfig) -> LLMError:
    with pytest.raises(LLMError) as info:
        run_complete(cfg)
    return info.value


def test_success_counts_usage_over_two_calls(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.reply("first answer", usage=(100, 20)).reply("second", finish_reason="content_filter", usage=(50, 7))
    cfg = make_config(scripted_llm, temperature=0.7, max_tokens=1234)

    async def go():
        async with ChatModel(cfg) as model:
            first = await model.complete(MESSAGES)
            second = await model.complete(MESSAGES, temperature=0.2)
            return first, second, model.usage

    first, second, usage = asyncio.run(go())
    assert first.text == "first answer"
    assert first.finish_reason == "stop"
    assert first.usage == TokenUsage(100, 20, 1)
    assert first.model == "test-model"
    assert first.latency_s > 0
    assert second.finish_reason == "content_filter"
    assert usage == TokenUsage(150, 27, 2)
    assert usage.total_tokens == 177
    sent = scripted_llm.requests
    assert [r["temperature"] for r in sent] == [0.7, 0.2]
    assert sent[0]["model"] == "test-model"
    assert sent[0]["max_tokens"] == 1234
    assert sent[0]["messages"] == MESSAGES


def test_max_tokens_none_is_not_sent(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.reply("ok")
    run_complete(make_config(scripted_llm, max_tokens=None))
    assert "max_tokens" not in scripted_llm.requests[0]


def test_server_error_then_success_is_retried_by_the_client(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.reply("overloaded", status=500, headers=FAST_RETRY).reply("recovered")
    reply, usage = run_complete(make_config(scripted_llm, max_retries=2))
    assert reply.text == "recovered"
    assert len(scripted_llm.requests) == 2
    assert usage.requests == 1


def test_rate_limit_then_success(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.reply("slow down", status=429, headers={"retry-after": "0", **FAST_RETRY}).reply("fine")
    reply, _ = run_complete(make_config(scripted_llm, max_retries=1))
    assert reply.text == "fine"
    assert len(scripted_llm.requests) == 2


def test_persistent_server_error(scripted_llm: ScriptedLLM) -> None:
    for _ in range(3):
        scripted_llm.reply("engine crashed", status=503, headers=FAST_RETRY)
    error = run_failing(make_config(scripted_llm, max_retries=2))
    assert error.kind == "server"
    assert len(scripted_llm.requests) == 3
    text = str(error)
    assert "HTTP 503" in text and "2 retries" in text and "engine crashed" in text
    assert "test-model" in text and scripted_llm.base_url in text


def test_persistent_rate_limit(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.reply("quota", status=429, headers=FAST_RETRY).reply("quota", status=429, headers=FAST_RETRY)
    error = run_failing(make_config(scripted_llm, max_retries=1))
    assert error.kind == "rate_limit"
    assert "HTTP 429" in str(error) and "1 retries" in str(error)


def test_timeout(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.reply("too late", delay_s=0.8)
    error = run_failing(make_config(scripted_llm, timeout_s=0.3, max_retries=0))
    assert error.kind == "timeout"
    assert "timed out" in str(error) and "retries disabled" in str(error)


def test_connection_refused() -> None:
    cfg = AgentConfig(model_id="m", base_url="http://127.0.0.1:9/v1", max_retries=0, timeout_s=5)
    error = run_failing(cfg)
    assert error.kind == "connection"
    assert "127.0.0.1:9" in str(error)


def test_auth_error_never_leaks_the_key(scripted_llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    scripted_llm.reply(f"Incorrect API key provided: {SECRET}", status=401)
    cfg = make_config(scripted_llm)
    error = run_failing(cfg)
    assert error.kind == "auth"
    assert "HTTP 401" in str(error)
    assert SECRET not in str(error) and SECRET not in repr(error)
    assert len(scripted_llm.requests) == 1  # 401 is not retried
    model = ChatModel(cfg)
    assert SECRET not in repr(model) and SECRET not in repr(model.endpoint)
    asyncio.run(model.aclose())


@pytest.mark.parametrize(
    ("status", "kind"), [(404, "not_found"), (400, "bad_request"), (403, "auth"), (422, "bad_request")]
)
def test_status_kinds(scripted_llm: ScriptedLLM, status: int, kind: str) -> None:
    scripted_llm.reply("nope", status=status)
    error = run_failing(make_config(scripted_llm))
    assert error.kind == kind
    assert f"HTTP {status}" in str(error) and "nope" in str(error)


@pytest.mark.parametrize("content", ["", None, "  \n"])
def test_empty_content(scripted_llm: ScriptedLLM, content: str | None) -> None:
    scripted_llm.reply(content).reply(content)  # asked once more before it counts
    error = run_failing(make_config(scripted_llm))
    assert error.kind == "empty"
    assert "no text" in str(error)


def test_empty_content_after_length_says_raise_max_tokens(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.reply(None, finish_reason="length").reply(None, finish_reason="length")
    error = run_failing(make_config(scripted_llm, max_tokens=64))
    assert error.kind == "empty"
    assert "max_tokens=128" in str(error)  # the budget of the second request


def test_the_defaults_leave_a_reasoning_model_room_to_think(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.reply("ok")
    cfg = make_config(scripted_llm)
    run_complete(cfg)
    assert scripted_llm.requests[0]["max_tokens"] == cfg.max_tokens >= 32768
    assert cfg.timeout_s >= 600 and cfg.model_give_up_s > 2 * cfg.timeout_s


def test_a_cut_reply_is_asked_again_with_twice_the_budget(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.reply("<think>still thinking", finish_reason="length").reply("the answer")
    reply, usage = run_complete(make_config(scripted_llm, max_tokens=1000))
    assert reply.text == "the answer" and reply.finish_reason == "stop"
    assert [r["max_tokens"] for r in scripted_llm.requests] == [1000, 2000]
    assert usage.requests == 2


def test_an_empty_reply_is_asked_again_before_it_counts(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.reply("").reply("second time lucky")
    reply, _ = run_complete(make_config(scripted_llm))
    assert reply.text == "second time lucky"


def test_a_providers_reasoning_options_pass_through(scripted_llm: ScriptedLLM) -> None:
    rejection = "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens'."
    scripted_llm.reply("ok").reply(rejection, status=400).reply("ok")
    thinking = {"chat_template_kwargs": {"enable_thinking": True}}
    cfg = make_config(scripted_llm, reasoning_effort="high", extra_body=thinking, max_tokens=900)
    run_complete(cfg)
    run_complete(cfg)
    first, _, last = scripted_llm.requests
    assert first["reasoning_effort"] == "high" and first["chat_template_kwargs"] == {"enable_thinking": True}
    assert last["reasoning_effort"] == "high" and last["chat_template_kwargs"] == {"enable_thinking": True}
    assert last["max_completion_tokens"] == 900


def test_usage_by_role_with_reasoning_and_cached_tokens(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.reply("plan", usage=(1000, 800), reasoning_tokens=700, cached_tokens=512)
    scripted_llm.reply("code", usage=(2000, 300))

    async def go():
        async with ChatModel(make_config(scripted_llm)) as model:
            await model.complete(MESSAGES, role="optimizer")
            await model.complete(MESSAGES, role="generator")
            return model.usage_counts()

    counts = asyncio.run(go())
    assert counts["prompt_tokens"] == 3000 and counts["completion_tokens"] == 1100 and counts["requests"] == 2
    assert counts["reasoning_tokens"] == 700 and counts["cached_tokens"] == 512
    assert counts["optimizer.reasoning_tokens"] == 700 and counts["optimizer.cached_tokens"] == 512
    assert counts["generator.prompt_tokens"] == 2000 and counts["generator.reasoning_tokens"] == 0


def test_an_answer_that_is_not_a_chat_completion(httpserver: HTTPServer) -> None:
    httpserver.expect_request("/v1/chat/completions").respond_with_data(
        "<html>UI</html>", content_type="text/html"
    )
    error = run_failing(AgentConfig(model_id="m", base_url=httpserver.url_for("/v1")))
    assert error.kind == "protocol"
    assert "not answer with a chat completion" in str(error) and "/v1" in str(error)


def test_a_request_without_a_scripted_reply_is_recorded(scripted_llm: ScriptedLLM) -> None:
    error = run_failing(make_config(scripted_llm))
    assert error.kind == "bad_request" and "no reply queued" in str(error)
    assert len(scripted_llm.unexpected) == 1 and scripted_llm.pending == 0
    scripted_llm.unexpected.clear()  # expected here; the fixture would fail the test otherwise


def test_falls_back_to_max_completion_tokens(scripted_llm: ScriptedLLM) -> None:
    rejection = (
        "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens'."
    )
    scripted_llm.reply(rejection, status=400).reply("one").reply("two")

    async def go():
        async with ChatModel(make_config(scripted_llm, max_tokens=500)) as model:
            return [(await model.complete(MESSAGES)).text for _ in range(2)]

    assert asyncio.run(go()) == ["one", "two"]
    first, second, third = scripted_llm.requests
    assert first["max_tokens"] == 500
    assert second["max_completion_tokens"] == 500 and "max_tokens" not in second
    assert third["max_completion_tokens"] == 500


def test_requests_are_logged_without_the_key(
    scripted_llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    scripted_llm.reply("logged", usage=(11, 3))
    with caplog.at_level(logging.DEBUG):
        run_complete(make_config(scripted_llm))
    ours = [r.getMessage() for r in caplog.records if r.name == "geak.agent.llm"]
    assert any("prompt_tokens=11 completion_tokens=3" in m and "test-model" in m for m in ours)
    assert all(SECRET not in r.getMessage() for r in caplog.records)


def test_the_key_is_sent_as_bearer_token(scripted_llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_LLM_KEY", SECRET)
    scripted_llm.reply("ok")
    run_complete(make_config(scripted_llm, api_key_env="MY_LLM_KEY"))
    request, _ = scripted_llm.server.log[-1]
    assert request.headers["Authorization"] == f"Bearer {SECRET}"


# --- endpoint resolution ---


def test_endpoint_from_config_and_custom_key_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_LLM_KEY", SECRET)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-other")
    cfg = AgentConfig(model_id="m", base_url="https://llm.example.com/v1", api_key_env="MY_LLM_KEY")
    endpoint = resolve_endpoint(cfg)
    assert endpoint == Endpoint("m", "https://llm.example.com/v1", SECRET)
    assert not endpoint.is_local
    assert SECRET not in repr(endpoint) and SECRET not in endpoint.describe()


def test_custom_key_env_falls_back_to_openai_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    endpoint = resolve_endpoint(AgentConfig(model_id="m", api_key_env="MY_LLM_KEY"))
    assert endpoint.api_key == SECRET
    assert endpoint.base_url is None
    assert "OpenAI API" in endpoint.describe()


def test_base_url_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "https://proxy.example.org/v1")
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    assert resolve_endpoint(AgentConfig(model_id="m")).base_url == "https://proxy.example.org/v1"
    configured = AgentConfig(model_id="m", base_url="https://mine.example.org/v1")
    assert resolve_endpoint(configured).base_url == "https://mine.example.org/v1"


@pytest.mark.parametrize(
    "url",
    ["http://localhost:8000/v1", "http://127.0.0.1:11434/v1", "http://[::1]:30000/v1", "http://0.0.0.0:8/v1"],
)
def test_local_endpoint_needs_no_key(url: str) -> None:
    endpoint = resolve_endpoint(AgentConfig(model_id="llama", base_url=url))
    assert endpoint.api_key == LOCAL_PLACEHOLDER_KEY
    assert endpoint.is_local


def test_local_base_url_from_environment_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:11434/v1")
    assert resolve_endpoint(AgentConfig(model_id="qwen")).api_key == LOCAL_PLACEHOLDER_KEY


def test_remote_endpoint_without_key_names_the_variable() -> None:
    cfg = AgentConfig(model_id="m", base_url="https://llm.example.com/v1", api_key_env="MY_LLM_KEY")
    with pytest.raises(LLMError) as info:
        resolve_endpoint(cfg)
    assert info.value.kind == "config"
    assert "MY_LLM_KEY" in str(info.value) and "OPENAI_API_KEY" in str(info.value)
    with pytest.raises(LLMError, match="OPENAI_API_KEY"):
        resolve_endpoint(AgentConfig(model_id="gpt-4o"))


def test_no_model_configured() -> None:
    with pytest.raises(LLMError, match="model_id") as info:
        resolve_endpoint(AgentConfig())
    assert info.value.kind == "config"


def test_token_usage_arithmetic() -> None:
    total = TokenUsage(1, 2, 1) + TokenUsage(10, 20, 1)
    assert total == TokenUsage(11, 22, 2)
    total.add(TokenUsage(100, 200, 3))
    assert (total.prompt_tokens, total.completion_tokens, total.requests, total.total_tokens) == (
        111,
        222,
        5,
        333,
    )
