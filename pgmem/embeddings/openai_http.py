"""An embedder for any OpenAI-compatible ``/embeddings`` endpoint, over the standard library.

Works with OpenAI itself and with local servers that speak the same protocol
(llama.cpp, vLLM, Ollama, text-embeddings-inference, LM Studio). No SDK: one JSON POST
per batch through :mod:`urllib.request`, retried with exponential backoff and jitter
on rate limits, server errors, dropped connections and timeouts.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import math
import os
import random
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np

from pgmem.embeddings.base import MAX_DIMENSION, Vectors, as_text_list, normalize_rows
from pgmem.embeddings.registry import register_embedder
from pgmem.errors import ConfigurationError, EmbeddingError
from pgmem.validate import at_least, describe_value, text_problem, timeout_seconds, whole

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MODEL = "text-embedding-3-small"
BASE_URL_VARIABLES = ("PGMEM_OPENAI_BASE_URL", "OPENAI_BASE_URL")
API_KEY_VARIABLES = ("PGMEM_OPENAI_API_KEY", "OPENAI_API_KEY")

# A server asking for a longer pause than this is treated as asking for this long:
# an embedding call blocking for minutes looks like a hang to the caller.
MAX_RETRY_AFTER = 60.0
MAX_BACKOFF = 30.0
BODY_EXCERPT_CHARS = 300
#: Longest model name, in characters (it is stored as the embedding model's name).
MAX_MODEL_CHARS = 256
_PROBE_TEXT = "dimension probe"


def _first_environment_value(names: Sequence[str]) -> str | None:
    for variable in names:
        value = os.environ.get(variable, "").strip()
        if value:
            return value
    return None


def _retry_after_seconds(header: str | None) -> float | None:
    """Parse a Retry-After header (seconds or an HTTP date); None when absent or unreadable."""
    if not header:
        return None
    header = header.strip()
    try:
        seconds = float(header)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(header)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    if not math.isfinite(seconds):
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


class _Retryable(Exception):
    """One failed attempt that may succeed if repeated."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible HTTP endpoint.

    Each batch is one ``POST {base_url}/embeddings`` with ``{"model", "input"}``; the
    response's ``data`` items are put back in input order by their ``index``, checked
    and L2-normalised.

    Parameters
    ----------
    model : str
        Model name sent to the server, e.g. ``"text-embedding-3-small"``.
    base_url : str, optional
        API root; default ``PGMEM_OPENAI_BASE_URL``, else ``OPENAI_BASE_URL``, else
        ``https://api.openai.com/v1``.
    api_key : str, optional
        Bearer token; default ``PGMEM_OPENAI_API_KEY``, else ``OPENAI_API_KEY``. Without
        one no ``Authorization`` header is sent, which suits local servers. The key never
        appears in messages or ``repr``.
    dimension : int, optional
        Expected vector length; a response of another length is an error. When omitted,
        the first response fixes it, and reading :attr:`dimension` before any call sends
        a one-text probe (so does ``isinstance(embedder, Embedder)`` on Python 3.11,
        which reads every protocol member). It is a check only: no ``dimensions``
        field is sent.
    batch_size : int
        Texts per request (default 128).
    timeout : float
        Seconds to wait for each request (default 30; at most 86,400).
    max_retries : int
        Retries after the first attempt on HTTP 429, 5xx, connection errors and
        timeouts (default 5); other 4xx responses fail at once.
    backoff : float
        Base delay in seconds; attempt ``n`` waits ``backoff * 2**n`` with jitter (at
        most 30 s), or the server's ``Retry-After`` (at most 60 s) when given.

    Attributes
    ----------
    name : str
        ``"openai:<model>"``.
    endpoint : str
        The URL requests go to.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        dimension: int | None = None,
        batch_size: int = 128,
        timeout: float = 30.0,
        max_retries: int = 5,
        backoff: float = 0.5,
    ) -> None:
        if not isinstance(model, str) or text_problem(model, max_chars=MAX_MODEL_CHARS):
            raise ConfigurationError(f"OpenAIEmbedder model must be a non-empty name, got {describe_value(model)}")
        root = base_url or _first_environment_value(BASE_URL_VARIABLES) or DEFAULT_BASE_URL
        parsed = urllib.parse.urlsplit(root)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ConfigurationError(
                f"OpenAIEmbedder base_url must be an http(s) URL such as {DEFAULT_BASE_URL}, got {root!r}"
            )
        if dimension is not None:
            whole("OpenAIEmbedder dimension", dimension, 1, MAX_DIMENSION)
        whole("OpenAIEmbedder batch_size", batch_size, 1)
        whole("OpenAIEmbedder max_retries", max_retries, 0)
        timeout_seconds("OpenAIEmbedder timeout", timeout)
        at_least("OpenAIEmbedder backoff", backoff, 0.0)
        self.model = model.strip()
        self.name = f"openai:{self.model}"
        self.endpoint = root.rstrip("/") + "/embeddings"
        self.batch_size = batch_size
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.backoff = float(backoff)
        self._api_key = api_key or _first_environment_value(API_KEY_VARIABLES)
        self._dimension = dimension
        self._dimension_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(model={self.model!r}, endpoint={self.endpoint!r})"

    @property
    def dimension(self) -> int:
        """Vector length; discovered with a one-text request if not known yet."""
        if self._dimension is None:
            with self._dimension_lock:
                if self._dimension is None:
                    self.embed([_PROBE_TEXT])
        if self._dimension is None:  # embed() always sets it or raises
            raise EmbeddingError(f"embedder {self.name!r}: could not determine the dimension")
        return self._dimension

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts``; see :meth:`pgmem.embeddings.Embedder.embed`.

        Raises
        ------
        EmbeddingError
            The server failed after all retries, refused the request, or answered with
            the wrong number of vectors, the wrong dimension or non-finite values.
        """
        items = as_text_list(texts)
        if not items:
            return np.empty((0, self.dimension), dtype=np.float32)
        batches = [
            self._embed_batch(items[start : start + self.batch_size]) for start in range(0, len(items), self.batch_size)
        ]
        return np.concatenate(batches, axis=0)

    def _embed_batch(self, batch: list[str]) -> Vectors:
        payload = self._post({"model": self.model, "input": batch})
        rows = self._vectors_from(payload, len(batch))
        width = len(rows[0])
        if self._dimension is None:
            self._dimension = width
        elif width != self._dimension:
            raise EmbeddingError(
                f"embedder {self.name!r} returned {width}-dimensional vectors, expected {self._dimension}"
            )
        return normalize_rows(np.array(rows, dtype=np.float64), source=self.name)

    def _vectors_from(self, payload: Any, count: int) -> list[list[float]]:
        data = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(data, list):
            raise EmbeddingError(f"embedder {self.name!r}: response from {self.endpoint} has no 'data' list")
        if len(data) != count:
            raise EmbeddingError(
                f"embedder {self.name!r}: sent {count} texts to {self.endpoint}, got {len(data)} vectors back"
            )
        by_index: dict[int, list[float]] = {}
        for item in data:
            index = item.get("index") if isinstance(item, dict) else None
            vector = item.get("embedding") if isinstance(item, dict) else None
            if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
                raise EmbeddingError(
                    f"embedder {self.name!r}: response item has invalid index {index!r} for a batch of {count}"
                )
            if index in by_index:
                raise EmbeddingError(f"embedder {self.name!r}: response repeats index {index}")
            if (
                not isinstance(vector, list)
                or not vector
                or not all(isinstance(value, int | float) and not isinstance(value, bool) for value in vector)
            ):
                raise EmbeddingError(
                    f"embedder {self.name!r}: 'embedding' of index {index} is not a list of"
                    " numbers (base64 encoding is not supported)"
                )
            by_index[index] = vector
        rows = [by_index[index] for index in range(count)]
        widths = {len(row) for row in rows}
        if len(widths) > 1:
            raise EmbeddingError(
                f"embedder {self.name!r} returned vectors of different lengths {sorted(widths)} in one response"
            )
        return rows

    def _post(self, body: dict[str, Any]) -> Any:
        data = json.dumps(body).encode("utf-8")
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": "pgmem",
        }
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        attempt = 0
        while True:
            request = urllib.request.Request(self.endpoint, data=data, headers=headers)
            try:
                return self._attempt(request)
            except _Retryable as failure:
                if attempt >= self.max_retries:
                    raise EmbeddingError(
                        f"embedder {self.name!r}: {failure} (gave up after {attempt + 1} attempts)"
                    ) from failure
                time.sleep(self._delay(attempt, failure.retry_after))
                attempt += 1

    def _attempt(self, request: urllib.request.Request) -> Any:
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            try:
                excerpt = self._excerpt(exc.read())
            except (OSError, http.client.HTTPException):
                excerpt = "(body unreadable)"
            finally:
                exc.close()
            message = f"POST {self.endpoint} returned HTTP {exc.code}: {excerpt}"
            if exc.code == 429 or 500 <= exc.code <= 599:
                retry_after = _retry_after_seconds(exc.headers.get("Retry-After"))
                raise _Retryable(message, retry_after) from exc
            raise EmbeddingError(f"embedder {self.name!r}: {message}") from exc
        except (OSError, http.client.HTTPException) as exc:
            # URLError (refused, DNS), TimeoutError, ConnectionResetError and
            # RemoteDisconnected all land here: transient by nature.
            reason = getattr(exc, "reason", exc)
            raise _Retryable(f"POST {self.endpoint} failed: {reason!r}") from exc
        try:
            return json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise EmbeddingError(
                f"embedder {self.name!r}: response from {self.endpoint} is not JSON: {self._excerpt(raw)}"
            ) from exc

    def _excerpt(self, raw: bytes) -> str:
        text = " ".join(raw.decode("utf-8", errors="replace").split())
        if self._api_key:
            # Some servers echo the credential they rejected.
            text = text.replace(self._api_key, "[api key]")
        if len(text) > BODY_EXCERPT_CHARS:
            text = text[:BODY_EXCERPT_CHARS] + "..."
        return text or "(empty body)"

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return retry_after
        # Jitter spreads out clients that failed together, so they do not retry in step.
        return min(MAX_BACKOFF, self.backoff * 2.0**attempt) * random.uniform(0.5, 1.0)


register_embedder("openai", lambda model: OpenAIEmbedder(model or DEFAULT_MODEL), option="<model>")
