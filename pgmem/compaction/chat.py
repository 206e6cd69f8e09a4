"""The chat model the compactor asks: a protocol, and an OpenAI-compatible implementation.

:class:`ChatModel` is all the controller needs (messages in, text and token usage
out), so a test can script it and an application can wrap its own client.
:class:`OpenAIChat` runs on the official ``openai`` client against OpenAI or any
server speaking the same protocol (llama.cpp, vLLM, Ollama, LM Studio).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

from pgmem.compaction.tokens import TokenCounter
from pgmem.errors import ChatError, ConfigurationError
from pgmem.openai_client import PLACEHOLDER_API_KEY, client_settings

if TYPE_CHECKING:
    import openai

__all__ = [
    "API_KEY_VARIABLES",
    "PLACEHOLDER_API_KEY",
    "AsyncChatModel",
    "AsyncOpenAIChat",
    "ChatModel",
    "ChatResult",
    "OpenAIChat",
]

API_KEY_VARIABLES = ("PGMEM_CHAT_API_KEY", "OPENAI_API_KEY")


@dataclass(frozen=True)
class ChatResult:
    """One completion: its text and what it cost.

    ``prompt_tokens`` and ``completion_tokens`` are the server's usage when it
    reports one, else the :class:`~pgmem.compaction.tokens.TokenCounter` estimate.
    """

    text: str
    prompt_tokens: int
    completion_tokens: int
    model: str
    latency_ms: float


@runtime_checkable
class ChatModel(Protocol):
    """What the compactor needs from a chat model.

    ``complete`` takes OpenAI-style message dicts and returns a :class:`ChatResult`;
    ``max_tokens`` caps the completion (the summary cap). ``model`` is recorded in
    telemetry.
    """

    model: str

    def complete(self, messages: Sequence[Mapping[str, Any]], *, max_tokens: int | None = None) -> ChatResult: ...


@runtime_checkable
class AsyncChatModel(Protocol):
    """What :class:`~pgmem.compaction.AsyncCompactor` needs: :class:`ChatModel` with ``complete`` awaited."""

    model: str

    async def complete(self, messages: Sequence[Mapping[str, Any]], *, max_tokens: int | None = None) -> ChatResult: ...


class _Endpoint:
    """What the sync and the async OpenAI-compatible chat models share: settings, the
    request, the error and the result (the client is theirs)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        temperature: float = 0.0,
        counter: TokenCounter | None = None,
    ) -> None:
        settings = client_settings(
            type(self).__name__,
            base_url=base_url,
            api_key=api_key,
            timeout=timeout,
            max_retries=max_retries,
            api_key_variables=API_KEY_VARIABLES,
        )
        if not model.strip():
            raise ConfigurationError("model must be a non-empty model name")
        if not 0.0 <= temperature <= 2.0:
            raise ConfigurationError(f"temperature must be in [0, 2], got {temperature}")
        self.base_url = base_url
        self.model = model
        self.temperature = temperature
        self.counter = counter or TokenCounter()
        self._settings = settings
        self._client = self._new_client()

    def _new_client(self) -> Any:
        raise NotImplementedError

    def _request(self, messages: Sequence[Mapping[str, Any]], max_tokens: int | None) -> dict[str, Any]:
        import openai

        if max_tokens is not None and max_tokens < 1:
            raise ConfigurationError(f"max_tokens must be >= 1 or None, got {max_tokens}")
        return {
            "model": self.model,
            "messages": cast(Any, list(messages)),
            "temperature": self.temperature,
            "max_tokens": openai.omit if max_tokens is None else max_tokens,
        }

    def _failure(self, exc: openai.OpenAIError) -> ChatError:
        return ChatError(
            f"chat call to model {self.model!r} at {self.base_url} failed: {self._settings.describe_failure(exc)}"
        )

    def _result(self, response: Any, messages: Sequence[Mapping[str, Any]], started: float) -> ChatResult:
        latency_ms = (time.perf_counter() - started) * 1000.0
        if not response.choices:
            raise ChatError(f"chat call to model {self.model!r} at {self.base_url} returned no choices")
        text = response.choices[0].message.content or ""
        usage = response.usage
        return ChatResult(
            text=text,
            prompt_tokens=usage.prompt_tokens if usage else self.counter.messages(messages),
            completion_tokens=usage.completion_tokens if usage else self.counter.text(text),
            model=response.model or self.model,
            latency_ms=latency_ms,
        )


class OpenAIChat(_Endpoint):
    """A chat model behind an OpenAI-compatible ``/chat/completions`` endpoint.

    Parameters
    ----------
    base_url : str
        The API root, e.g. ``https://api.openai.com/v1`` or ``http://127.0.0.1:8080/v1``.
    model : str
        The model name sent with every request.
    api_key : str, optional
        Defaults to ``PGMEM_CHAT_API_KEY``, then ``OPENAI_API_KEY``, then a placeholder
        (a local server needs none).
    timeout : float
        Seconds per request attempt, > 0 (default 60).
    max_retries : int
        Retries on connection errors, timeouts, 408/409/429 and 5xx, with the client's
        exponential backoff and ``Retry-After``, >= 0 (default 2).
    temperature : float
        Sampling temperature, in [0, 2] (default 0: probes and summaries should repeat).
    counter : TokenCounter, optional
        Used when the server reports no usage.

    Raises
    ------
    ChatError
        From :meth:`complete`, once, wrapping the client error and naming the base URL
        and model.
    """

    def _new_client(self) -> Any:
        return self._settings.sync_client()

    def complete(self, messages: Sequence[Mapping[str, Any]], *, max_tokens: int | None = None) -> ChatResult:
        """Send ``messages`` and return the first choice's text and the token usage."""
        import openai

        request = self._request(messages, max_tokens)
        started = time.perf_counter()
        try:
            response = self._client.chat.completions.create(**request)
        except openai.OpenAIError as exc:
            raise self._failure(exc) from exc
        return self._result(response, messages, started)

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()


class AsyncOpenAIChat(_Endpoint):
    """:class:`OpenAIChat` on the official ``openai.AsyncOpenAI`` client, for
    :class:`~pgmem.compaction.AsyncCompactor`: the same parameters, retries and errors,
    with :meth:`complete` and :meth:`close` awaited. The client binds to the event loop
    that first uses it."""

    def _new_client(self) -> Any:
        return self._settings.async_client()

    async def complete(self, messages: Sequence[Mapping[str, Any]], *, max_tokens: int | None = None) -> ChatResult:
        """Send ``messages`` and return the first choice's text and the token usage."""
        import openai

        request = self._request(messages, max_tokens)
        started = time.perf_counter()
        try:
            response = await self._client.chat.completions.create(**request)
        except openai.OpenAIError as exc:
            raise self._failure(exc) from exc
        return self._result(response, messages, started)

    async def close(self) -> None:
        """Close the HTTP connection pool."""
        await self._client.close()
