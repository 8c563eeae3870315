"""A `Model` for any OpenAI-compatible chat-completions endpoint, with its own retries."""

from __future__ import annotations

import asyncio
import logging
import math
import os
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, cast

from openai import APIConnectionError, APIStatusError, APITimeoutError, AsyncOpenAI, omit
from openai.types.chat import ChatCompletionFunctionToolParam, ChatCompletionMessageParam

from plangate.harness._errors import ConfigError
from plangate.harness._messages import Message, ModelResponse, ToolDefinition
from plangate.harness.models._endpoint import (
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT,
    EndpointSettings,
)
from plangate.harness.models._model import ModelError
from plangate.harness.models._wire import (
    WireError,
    messages_to_wire,
    read_completion,
    snippet,
    tools_to_wire,
)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
"""The endpoint used when neither base-URL variable is set."""
BASE_URL_VARIABLES = ("PLANGATE_OPENAI_BASE_URL", "OPENAI_BASE_URL")
"""Environment variables that may hold the base URL, the first set one wins."""
API_KEY_VARIABLES = ("PLANGATE_OPENAI_API_KEY", "OPENAI_API_KEY")
"""Environment variables that may hold the API key, the first set one wins."""

_log = logging.getLogger("plangate.model")

_HINTS = {
    401: "check the API key",
    403: "check that the API key may use this model",
    404: "check the base URL and the model name",
}


@dataclass(slots=True, kw_only=True, eq=False)
class OpenAIModel:
    """A model behind an OpenAI-compatible `/chat/completions` endpoint.

    Retries HTTP 429, 5xx, connection errors and timeouts with exponential backoff and jitter,
    honouring `Retry-After`; any other failure, or a reply it cannot read, raises `ModelError`.
    The `openai` client's own retries are off. Close the model with `aclose()` (or use it as an
    async context manager) to release its connections.
    """

    model: str
    """The model to ask for (`gpt-4o-mini`); also the model's `name`."""
    api_key: str = field(repr=False)
    """The endpoint's API key; never shown in a repr or an error message."""
    base_url: str = DEFAULT_BASE_URL
    """The API base URL, up to and including `/v1`."""
    timeout: float = 60.0
    """Seconds one attempt may take before it counts as timed out."""
    max_retries: int = 4
    """Retries after the first attempt; 0 means a single attempt."""
    deadline: float | None = None
    """Seconds all attempts of one call may take together, waits included (None: no limit)."""
    backoff_base: float = 0.5
    """Upper bound of the first retry's delay, in seconds; it doubles with each retry."""
    backoff_max: float = 8.0
    """Longest delay between attempts, in seconds, `Retry-After` included."""
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    """Draws the jitter; seeded, so a run's delays can be replayed."""
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    """Waits between attempts; tests pass one that records the delay instead."""
    clock: Callable[[], float] = field(default=lambda: asyncio.get_running_loop().time())
    """Seconds on a monotonic clock, for the deadline; tests pass their own."""
    name: str = field(init=False)
    """The model's name for traces: `model`."""
    _client: AsyncOpenAI = field(init=False, repr=False)

    def __post_init__(self) -> None:
        _check_options(self)
        self.name = self.model
        self._client = AsyncOpenAI(
            api_key=self.api_key, base_url=self.base_url, timeout=self.timeout, max_retries=0
        )

    @classmethod
    def from_env(cls, model: str, endpoint: EndpointSettings | None = None) -> OpenAIModel:
        """Build a model from the environment.

        The base URL comes from `PLANGATE_OPENAI_BASE_URL` or `OPENAI_BASE_URL` (default
        `https://api.openai.com/v1`), the key from `PLANGATE_OPENAI_API_KEY` or `OPENAI_API_KEY`;
        the per-attempt timeout, the retries and the total deadline of a call from `endpoint`,
        or where it leaves them unset from `PLANGATE_MODEL_TIMEOUT`, `PLANGATE_MODEL_RETRIES`
        and `PLANGATE_MODEL_DEADLINE`.

        Args:
            model: The model to ask for.
            endpoint: Settings that win over the environment's.

        Raises:
            ConfigError: Neither API-key variable is set, or a setting is not a number.
        """
        base_url = _first_set(BASE_URL_VARIABLES) or DEFAULT_BASE_URL
        api_key = _first_set(API_KEY_VARIABLES)
        if api_key is None:
            raise ConfigError(
                f"no API key for model {model!r} at {base_url}: set {API_KEY_VARIABLES[0]} "
                f"(or {API_KEY_VARIABLES[1]}) to the endpoint's key"
            )
        settings = (endpoint or EndpointSettings()).over(EndpointSettings.from_env())
        return cls(
            model=model,
            api_key=api_key,
            base_url=base_url,
            timeout=DEFAULT_TIMEOUT if settings.timeout is None else settings.timeout,
            max_retries=DEFAULT_RETRIES if settings.retries is None else settings.retries,
            deadline=settings.deadline,
        )

    async def request(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition]
    ) -> ModelResponse:
        """Send the conversation and the tools, and return the model's answer.

        Raises:
            ModelError: The endpoint failed after all retries, refused the request, or sent a
                reply that is not a chat completion.
        """
        text, attempts = await self._post(messages_to_wire(messages), tools_to_wire(tools))
        try:
            return read_completion(text, self.model)
        except WireError as bad:
            raise self._error(f"sent a malformed reply: {bad}", attempts) from None

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        await self._client.close()

    async def __aenter__(self) -> OpenAIModel:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _post(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> tuple[str, int]:
        """Post until an attempt succeeds; return the body text and the number of attempts."""
        attempt = 0
        start = self.clock()
        while True:
            attempt += 1
            try:
                response = await self._client.chat.completions.with_raw_response.create(
                    model=self.model,
                    messages=cast("list[ChatCompletionMessageParam]", messages),
                    tools=cast("list[ChatCompletionFunctionToolParam]", tools) or omit,
                )
                return response.text, attempt
            except (APIStatusError, APIConnectionError) as err:
                failure = _failure(err, self.timeout)
                if not failure.retryable or attempt > self.max_retries:
                    # A status error's text quotes the server's body, which may echo the key:
                    # the message already holds what it says, so it is not chained.
                    cause = None if isinstance(err, APIStatusError) else err
                    raise self._error(failure.what, attempt) from cause
                delay = self._delay(attempt, failure.retry_after)
                if self.deadline is not None and self.clock() - start + delay > self.deadline:
                    what = f"{failure.what}; no time left for a retry within the deadline of "
                    raise self._error(f"{what}{self.deadline:g} s", attempt) from None
                _log.warning(
                    "model %r: %s; retry %d of %d in %.1f s",
                    self.model, failure.what, attempt, self.max_retries, delay,
                )  # fmt: skip
                await self.sleep(delay)

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        if retry_after is not None:
            return min(retry_after, self.backoff_max)
        ceiling = min(self.backoff_max, self.backoff_base * 2.0 ** (attempt - 1))
        return ceiling * (0.5 + 0.5 * self.rng.random())

    def _error(self, what: str, attempts: int) -> ModelError:
        tries = "1 attempt" if attempts == 1 else f"{attempts} attempts"
        message = f"model {self.model!r} at {self.base_url}: {what} (after {tries})"
        return ModelError(_redact(message, self.api_key))


@dataclass(frozen=True, slots=True)
class _Failure:
    what: str
    """What went wrong, for the error message."""
    retryable: bool
    """Whether another attempt may succeed."""
    retry_after: float | None = None
    """The server's `Retry-After`, in seconds."""


def _check_options(model: OpenAIModel) -> None:
    if not model.model:
        raise ConfigError("OpenAIModel: `model` is empty; name the model to ask for")
    if not model.api_key:
        raise ConfigError(
            "OpenAIModel: `api_key` is empty; for an endpoint that needs no key, pass any text"
        )
    if model.timeout <= 0 or model.max_retries < 0:
        raise ConfigError(
            f"OpenAIModel: timeout={model.timeout!r} must be > 0 and "
            f"max_retries={model.max_retries!r} must be >= 0"
        )
    if model.deadline is not None and model.deadline <= 0:
        raise ConfigError(f"OpenAIModel: deadline={model.deadline!r} must be > 0 (or None)")
    if model.backoff_base < 0 or model.backoff_max < 0:
        raise ConfigError(
            f"OpenAIModel: backoff_base={model.backoff_base!r} and "
            f"backoff_max={model.backoff_max!r} must be >= 0"
        )


def _first_set(variables: Sequence[str]) -> str | None:
    for variable in variables:
        value = os.environ.get(variable, "").strip()
        if value:
            return value
    return None


def _redact(text: str, secret: str) -> str:
    # Short values would match ordinary words; real keys are long.
    return text.replace(secret, "[redacted]") if len(secret) >= 8 else text


def _failure(err: APIStatusError | APIConnectionError, timeout: float) -> _Failure:
    if isinstance(err, APITimeoutError):
        return _Failure(f"timed out after {timeout:g} s", retryable=True)
    if isinstance(err, APIConnectionError):
        cause = type(err.__cause__).__name__ if err.__cause__ else "unknown cause"
        return _Failure(f"connection failed ({cause})", retryable=True)
    status = err.status_code
    detail = f"HTTP {status}: {_error_detail(err)}"
    if status in _HINTS:
        detail += f"; {_HINTS[status]}"
    if status == 429 or status >= 500:
        return _Failure(detail, retryable=True, retry_after=_retry_after(err.response.headers))
    return _Failure(detail, retryable=False)


def _error_detail(err: APIStatusError) -> str:
    body = err.body
    if isinstance(body, Mapping) and isinstance(body.get("message"), str):
        return snippet(body["message"])
    return snippet(body) if body else "empty body"


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """The `Retry-After` header in seconds, or None when absent or not a number of seconds."""
    try:
        seconds = float(headers.get("retry-after", ""))
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None
