"""The one place pgmem configures the official ``openai`` client and words its failures.

The embedder (:class:`~pgmem.embeddings.OpenAIEmbedder`) and the compactor's chat model
(:class:`~pgmem.compaction.OpenAIChat`) both talk to OpenAI or to a server speaking the
same protocol (llama.cpp, vLLM, Ollama, text-embeddings-inference, LM Studio). Both
get their settings checked here, their sync or async client built here, and their
client errors described here; retries, backoff, ``Retry-After`` and timeouts are the
client's.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pgmem.errors import ConfigurationError
from pgmem.validate import timeout_seconds, whole

if TYPE_CHECKING:
    import openai

#: Sent when no key is configured: local servers ignore the header, the client requires one.
PLACEHOLDER_API_KEY = "pgmem-no-key"
BODY_EXCERPT_CHARS = 300
#: The ``openai`` client's header saying how many retries preceded a request.
RETRY_COUNT_HEADER = "x-stainless-retry-count"


def first_environment_value(names: Sequence[str]) -> str | None:
    """The first non-blank value among the environment variables ``names``, else None."""
    for variable in names:
        value = os.environ.get(variable, "").strip()
        if value:
            return value
    return None


@dataclass(frozen=True)
class ClientSettings:
    """Checked settings for one OpenAI-compatible server; build with :func:`client_settings`."""

    owner: str
    base_url: str
    api_key: str = field(repr=False)
    timeout: float
    max_retries: int

    def sync_client(self) -> openai.OpenAI:
        """A new synchronous client (its own connection pool; close it when done)."""
        import openai

        return openai.OpenAI(
            base_url=self.base_url, api_key=self.api_key, timeout=self.timeout, max_retries=self.max_retries
        )

    def async_client(self) -> openai.AsyncOpenAI:
        """A new asyncio client, bound to the event loop that first uses it."""
        import openai

        return openai.AsyncOpenAI(
            base_url=self.base_url, api_key=self.api_key, timeout=self.timeout, max_retries=self.max_retries
        )

    def describe_failure(self, exc: openai.OpenAIError) -> str:
        """What went wrong in a client call, for an error message: the error class, the
        HTTP status and a bounded excerpt of the body, and how many attempts it took.
        The API key never appears, even when the server echoes it."""
        import openai

        if isinstance(exc, openai.APIStatusError):
            message = f"{type(exc).__name__}: HTTP {exc.status_code}: {self.excerpt(exc.response.content)}"
        else:
            message = f"{type(exc).__name__}: {self._redact(str(exc))}"
        if isinstance(exc, openai.APIError):
            # The client numbers its attempts in a header of every request it sends.
            retries = exc.request.headers.get(RETRY_COUNT_HEADER, "0")
            attempts = int(retries) + 1 if retries.isascii() and retries.isdigit() else 1
            if attempts > 1:
                message += f" (gave up after {attempts} attempts)"
        return message

    def _redact(self, text: str) -> str:
        if self.api_key != PLACEHOLDER_API_KEY:
            text = text.replace(self.api_key, "[api key]")
        return text

    def excerpt(self, body: bytes) -> str:
        """A response body for a message: whitespace folded, key masked, at most 300 characters."""
        text = self._redact(" ".join(body.decode("utf-8", errors="replace").split()))
        if len(text) > BODY_EXCERPT_CHARS:
            text = text[:BODY_EXCERPT_CHARS] + "..."
        return text or "(empty body)"


def client_settings(
    owner: str,
    *,
    base_url: str | None,
    api_key: str | None,
    timeout: float,
    max_retries: int,
    base_url_variables: Sequence[str] = (),
    api_key_variables: Sequence[str] = (),
    default_base_url: str | None = None,
) -> ClientSettings:
    """Check and complete the settings of ``owner`` (a class name, used in messages).

    ``base_url`` falls back to the first set variable of ``base_url_variables``, then
    ``default_base_url``; ``api_key`` to ``api_key_variables``, then
    :data:`PLACEHOLDER_API_KEY`. Raises ConfigurationError naming the parameter.
    """
    root = base_url or first_environment_value(base_url_variables) or default_base_url or ""
    parsed = urllib.parse.urlsplit(root) if isinstance(root, str) else None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.netloc:
        example = default_base_url or "http://127.0.0.1:8080/v1"
        raise ConfigurationError(f"{owner} base_url must be an http(s) URL such as {example}, got {root!r}")
    whole(f"{owner} max_retries", max_retries, 0)
    return ClientSettings(
        owner=owner,
        base_url=root.rstrip("/"),
        api_key=api_key or first_environment_value(api_key_variables) or PLACEHOLDER_API_KEY,
        timeout=timeout_seconds(f"{owner} timeout", timeout),
        max_retries=max_retries,
    )
