"""Chat completions through any OpenAI-compatible endpoint (OpenAI, vLLM, SGLang, Ollama, LiteLLM, Azure...).

Retries with exponential backoff (429, 5xx, timeouts, dropped connections) are the openai client's own
(`max_retries`); failures that remain become one `LLMError` with a `kind` the agent can act on, and `ModelHealth`
decides when a model that keeps failing is given up (`ModelUnusable`: every later request fails at once). The API
key is never logged, shown in a repr, or included in an error message; nor is a password in `base_url`.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

import openai

from geak.evaluator import register_secret

from .config import AgentConfig, mask_url_credentials
from .model_health import ModelHealth

log = logging.getLogger(__name__)

LLMErrorKind = Literal[
    "config",
    "timeout",
    "connection",
    "rate_limit",
    "quota",
    "server",
    "protocol",  # what answered is not an OpenAI-compatible chat server (HTML, broken JSON, no choices)
    "auth",
    "not_found",
    "bad_request",
    "empty",
]

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
BASE_URL_ENV = "OPENAI_BASE_URL"
LOCAL_PLACEHOLDER_KEY = "not-needed"
MAX_SERVER_MESSAGE = 300
RETRY_BUDGET_FACTOR = 2  # an empty or cut reply is asked once more with this many times the max_tokens budget


class LLMError(RuntimeError):
    """A chat request that could not produce text. `kind` is one of `LLMErrorKind`."""

    def __init__(self, message: str, kind: LLMErrorKind):
        super().__init__(message)
        self.kind = kind


class ModelUnusable(LLMError):
    """The model was given up (see `ModelHealth`): stop asking it. `kind` is that of its last failure."""


@dataclass(frozen=True)
class Endpoint:
    """Where requests go. `base_url` None means the openai client's default (api.openai.com)."""

    model: str
    base_url: str | None
    api_key: str = field(repr=False)

    @property
    def is_local(self) -> bool:
        return self.base_url is not None and is_local_url(self.base_url)

    @property
    def secrets(self) -> tuple[str, ...]:
        """What must never be shown: the API key and a password written in the base URL."""
        password = urlsplit(self.base_url).password if self.base_url else None
        return tuple(s for s in (self.api_key, password) if s and s != LOCAL_PLACEHOLDER_KEY)

    def describe(self) -> str:
        where = mask_url_credentials(self.base_url) if self.base_url else "the OpenAI API (default base URL)"
        return f"model '{self.model}' at {where}"


@dataclass
class TokenUsage:
    """Token counts as the API reports them. `reasoning_tokens` (part of the completion) and `cached_tokens` (part of
    the prompt) are counted where the server says (``completion_tokens_details``, ``prompt_tokens_details``)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, other: TokenUsage) -> None:
        """Accumulate `other` into this one."""
        for name, value in vars(other).items():
            setattr(self, name, getattr(self, name) + value)

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(**{name: value + getattr(other, name) for name, value in vars(self).items()})


@dataclass(frozen=True)
class ChatReply:
    text: str
    finish_reason: str | None
    usage: TokenUsage
    model: str
    latency_s: float


def is_local_url(url: str) -> bool:
    """Does `url` point at this machine (localhost, a loopback address, or 0.0.0.0)?"""
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


def resolve_endpoint(cfg: AgentConfig) -> Endpoint:
    """Model, base URL and API key, following the openai client's conventions.

    base_url: `cfg.base_url`, else `$OPENAI_BASE_URL`, else the client default. Key: the variable named by
    `cfg.api_key_env`, else `$OPENAI_API_KEY`; a local server may have none. Raises `LLMError(kind="config")`.
    """
    if cfg.model_id is None:
        raise LLMError("no LLM configured: set `model_id` (and `base_url` for a non-OpenAI server)", "config")
    base_url = cfg.base_url or os.environ.get(BASE_URL_ENV, "").strip() or None
    api_key = os.environ.get(cfg.api_key_env, "").strip() or os.environ.get(DEFAULT_KEY_ENV, "").strip()
    if not api_key:
        if base_url is not None and is_local_url(base_url):
            api_key = LOCAL_PLACEHOLDER_KEY
        else:
            where = mask_url_credentials(base_url) if base_url else "the OpenAI API"
            also = f" (or {DEFAULT_KEY_ENV})" if cfg.api_key_env != DEFAULT_KEY_ENV else ""
            raise LLMError(
                f"no API key for {where}: set the environment variable {cfg.api_key_env}{also}, "
                "or name another variable with `api_key_env` (a server that needs no key accepts any value)",
                "config",
            )
    register_secret(api_key)  # scrubbed from everything that comes back from evaluation jobs
    if base_url:
        register_secret(urlsplit(base_url).password)
    return Endpoint(model=cfg.model_id, base_url=base_url, api_key=api_key)


class ChatModel:
    """An async chat client bound to one model; `usage` accumulates over every answered request."""

    def __init__(self, cfg: AgentConfig, *, client: openai.AsyncOpenAI | None = None):
        if client is None:
            self.endpoint = resolve_endpoint(cfg)
            client = openai.AsyncOpenAI(
                api_key=self.endpoint.api_key,
                base_url=self.endpoint.base_url,
                timeout=cfg.timeout_s,
                max_retries=cfg.max_retries,
            )
            self._owns_client = True
        else:
            if cfg.model_id is None:
                raise LLMError("no LLM configured: set `model_id`", "config")
            self.endpoint = Endpoint(model=cfg.model_id, base_url=str(client.base_url), api_key=client.api_key)
            self._owns_client = False
        self._client = client
        self.temperature = cfg.temperature
        self.max_tokens = cfg.max_tokens
        self.reasoning_effort = cfg.reasoning_effort
        self.extra_body = dict(cfg.extra_body)
        self.usage = TokenUsage()
        self.usage_by_role: dict[str, TokenUsage] = {}
        self.health = ModelHealth(cfg.model_max_failures, cfg.model_give_up_s)
        self.unusable: ModelUnusable | None = None
        self._token_limit_param = "max_tokens"

    def __repr__(self) -> str:
        return f"ChatModel({self.endpoint.describe()}, usage={self.usage})"

    async def __aenter__(self) -> ChatModel:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP client if this object created it."""
        if self._owns_client:
            await self._client.close()

    async def complete(
        self, messages: list[dict[str, str]], *, temperature: float | None = None, role: str = "model"
    ) -> ChatReply:
        """One chat completion; its tokens count for `role` too (``usage_by_role``). An empty reply, or one cut by
        the token limit, is asked once more with twice the budget (a reasoning model may spend most of it thinking)
        before it counts. Raises `LLMError` when the endpoint fails (after the client's retries) or returns no text,
        and `ModelUnusable` once the model is given up (then at once, without asking it again)."""
        if not messages:
            raise ValueError("complete() needs at least one message")
        if self.unusable is not None:
            raise self.unusable
        started = self.health.request_started()
        try:
            async with asyncio.timeout(self.health.time_left()):  # not wait_for: it can swallow a cancellation
                reply = await self._request(messages, temperature, self.max_tokens, role)
                if not reply.text.strip() or reply.finish_reason == "length":
                    budget = self.max_tokens * RETRY_BUDGET_FACTOR if self.max_tokens else None
                    log.info("%s: %s reply; asking again with max_tokens=%s", role, reply.finish_reason, budget)
                    reply = await self._request(messages, temperature, budget, role)
                    if not reply.text.strip():
                        raise LLMError(self._empty_message(reply.finish_reason, budget), "empty")
        except TimeoutError:
            error = LLMError(
                f"{self.endpoint.describe()} did not answer within model_give_up_s={self.health.give_up_s:g} s",
                "timeout",
            )
        except LLMError as e:
            error = e
        else:
            self.health.succeeded()
            return reply
        reason = self.health.failed(error.kind, started)
        if reason is None:
            raise error
        self.unusable = ModelUnusable(f"{error} ({reason})", error.kind)
        raise self.unusable

    def usage_counts(self) -> dict[str, int]:
        """The token counts so far, flat for JSON and checkpoints: the totals, then per role (`optimizer.requests`)."""
        counts = dict(vars(self.usage))
        for role, usage in sorted(self.usage_by_role.items()):
            counts.update({f"{role}.{name}": value for name, value in vars(usage).items()})
        return counts

    async def _request(
        self, messages: list[dict[str, str]], temperature: float | None, max_tokens: int | None, role: str
    ) -> ChatReply:
        request: dict[str, Any] = {
            "model": self.endpoint.model,
            "messages": messages,
            "temperature": self.temperature if temperature is None else temperature,
        }
        if self.reasoning_effort is not None:
            request["reasoning_effort"] = self.reasoning_effort
        log.debug("LLM request: %s, %d messages", self.endpoint.describe(), len(messages))
        start = time.perf_counter()
        try:
            response = await self._create(request, max_tokens)
        except openai.OpenAIError as e:
            raise self._error(e) from None
        except ValueError as e:  # a body that is not JSON (json.JSONDecodeError) or not shaped like a reply
            raise LLMError(self._redact(f"{self._not_chat()}: {e}"), "protocol") from None
        latency = time.perf_counter() - start

        usage = _usage_of(response)
        self.usage.add(usage)
        self.usage_by_role.setdefault(role, TokenUsage()).add(usage)
        choices = getattr(response, "choices", None)
        if not isinstance(choices, list) or not choices:
            what = "an empty `choices` list" if isinstance(choices, list) else "something else"
            raise LLMError(f"{self._not_chat()}: it answered with {what}", "protocol")
        choice = choices[0]
        text = getattr(getattr(choice, "message", None), "content", None)
        finish_reason = getattr(choice, "finish_reason", None)
        model = getattr(response, "model", None) or self.endpoint.model
        log.debug(
            "LLM reply: model=%s prompt_tokens=%d completion_tokens=%d reasoning_tokens=%d finish_reason=%s "
            "latency=%.2fs",
            model,
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.reasoning_tokens,
            finish_reason,
            latency,
        )
        return ChatReply(text if isinstance(text, str) else "", finish_reason, usage, model, latency)

    def _not_chat(self) -> str:
        return (
            f"{self.endpoint.describe()} did not answer with a chat completion (check that `base_url` is the API "
            "root of an OpenAI-compatible server; it usually ends with /v1)"
        )

    async def _create(self, request: dict[str, Any], max_tokens: int | None) -> Any:
        """Send the request with the configured `extra_body`; switch to `max_completion_tokens` once if the model
        rejects `max_tokens` (OpenAI's reasoning models do)."""
        if max_tokens is None:
            return await self._client.chat.completions.create(**request, extra_body=self.extra_body or None)
        try:
            return await self._with_token_limit(request, max_tokens)
        except openai.BadRequestError as e:
            if self._token_limit_param != "max_tokens" or "max_completion_tokens" not in _server_message(e):
                raise
            log.debug("%s rejects max_tokens; using max_completion_tokens", self.endpoint.describe())
            self._token_limit_param = "max_completion_tokens"
            return await self._with_token_limit(request, max_tokens)

    async def _with_token_limit(self, request: dict[str, Any], max_tokens: int) -> Any:
        if self._token_limit_param == "max_tokens":
            return await self._client.chat.completions.create(
                **request, max_tokens=max_tokens, extra_body=self.extra_body or None
            )
        return await self._client.chat.completions.create(
            **request, extra_body={**self.extra_body, "max_completion_tokens": max_tokens}
        )

    def _empty_message(self, finish_reason: str | None, max_tokens: int | None) -> str:
        message = f"{self.endpoint.describe()} returned no text (finish_reason={finish_reason})"
        if finish_reason == "length":
            message += f"; the whole max_tokens={max_tokens} budget was used before any answer, raise it"
        elif finish_reason == "content_filter":
            message += "; the provider's content filter blocked the answer"
        return message

    def _error(self, e: openai.OpenAIError) -> LLMError:
        retries = self._client.max_retries
        after = f" (gave up after {retries} retries)" if retries else " (retries disabled)"
        where = self.endpoint.describe()
        kind: LLMErrorKind
        if isinstance(e, openai.APITimeoutError):
            kind, message = "timeout", f"request to {where} timed out after {self._client.timeout}s{after}"
        elif isinstance(e, openai.APIConnectionError):
            cause = f": {e.__cause__}" if e.__cause__ else ""
            kind, message = "connection", f"cannot connect to {where}{cause}{after}"
        elif isinstance(e, openai.APIStatusError):
            kind, message = self._status_error(e, where, after)
        else:
            kind, message = "server", f"unusable response from {where}: {e}"
        return LLMError(self._redact(message), kind)

    def _redact(self, text: str) -> str:
        for secret in self.endpoint.secrets:
            text = text.replace(secret, "***")
        return text

    def _status_error(self, e: openai.APIStatusError, where: str, after: str) -> tuple[LLMErrorKind, str]:
        status = e.status_code
        detail = _server_message(e)
        detail = f": {detail}" if detail else ""
        if isinstance(e, openai.RateLimitError) and _error_code(e) == "insufficient_quota":
            return "quota", f"{where} says the account's quota is used up (HTTP 429){detail}"
        if isinstance(e, openai.RateLimitError):
            return "rate_limit", f"rate limited by {where} (HTTP 429){after}{detail}"
        if isinstance(e, (openai.AuthenticationError, openai.PermissionDeniedError)):
            return "auth", f"{where} refused the API key (HTTP {status}){detail}; check the key's variable"
        if isinstance(e, openai.NotFoundError):
            return "not_found", (
                f"{where} answered HTTP 404{detail}; check `model_id` and that `base_url` is the API root "
                "(it usually ends with /v1)"
            )
        if status >= 500 or status == 408:
            return "server", f"server error from {where} (HTTP {status}){after}{detail}"
        return "bad_request", f"{where} rejected the request (HTTP {status}){detail}"


def _usage_of(response: Any) -> TokenUsage:
    usage = getattr(response, "usage", None)
    completion_details = getattr(usage, "completion_tokens_details", None)
    prompt_details = getattr(usage, "prompt_tokens_details", None)
    return TokenUsage(
        prompt_tokens=getattr(usage, "prompt_tokens", None) or 0,
        completion_tokens=getattr(usage, "completion_tokens", None) or 0,
        requests=1,
        reasoning_tokens=getattr(completion_details, "reasoning_tokens", None) or 0,
        cached_tokens=getattr(prompt_details, "cached_tokens", None) or 0,
    )


def _error_code(e: openai.APIStatusError) -> str | None:
    body = e.body
    inner = body.get("error", body) if isinstance(body, dict) else None
    return inner.get("code") if isinstance(inner, dict) else None


def _server_message(e: openai.APIStatusError) -> str:
    """The human part of an error body (`{"error": {"message": ...}}` or plain text), shortened."""
    body = e.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        body = inner.get("message", inner) if isinstance(inner, dict) else inner
    text = " ".join(str(body if body is not None else e.message).split())
    return text if len(text) <= MAX_SERVER_MESSAGE else text[: MAX_SERVER_MESSAGE - 3] + "..."

