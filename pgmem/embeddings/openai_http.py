"""An embedder for any OpenAI-compatible ``/embeddings`` endpoint, on the official ``openai`` client.

Works with OpenAI itself and with local servers that speak the same protocol
(llama.cpp, vLLM, Ollama, text-embeddings-inference, LM Studio). One request per batch;
retries (rate limits, server errors, dropped connections, timeouts), backoff with
jitter and ``Retry-After`` are the client's. :meth:`OpenAIEmbedder.embed` runs on the
synchronous client, :meth:`OpenAIEmbedder.aembed` on the asyncio one; both share the
request, the checks of the answer and the error messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import weakref
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from pgmem.embeddings.base import MAX_DIMENSION, Vectors, as_text_list, normalize_rows
from pgmem.embeddings.registry import register_embedder
from pgmem.errors import ConfigurationError, EmbeddingError
from pgmem.openai_client import client_settings
from pgmem.validate import describe_value, text_problem, whole

if TYPE_CHECKING:
    import openai

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MODEL = "text-embedding-3-small"
BASE_URL_VARIABLES = ("PGMEM_OPENAI_BASE_URL", "OPENAI_BASE_URL")
API_KEY_VARIABLES = ("PGMEM_OPENAI_API_KEY", "OPENAI_API_KEY")
#: Longest model name, in characters (it is stored as the embedding model's name).
MAX_MODEL_CHARS = 256
_PROBE_TEXT = "dimension probe"


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible HTTP endpoint.

    Each batch is one ``POST {base_url}/embeddings`` with ``{"model", "input",
    "encoding_format": "float"}``; the response's ``data`` items are put back in input
    order by their ``index``, checked and L2-normalised.

    Parameters
    ----------
    model : str
        Model name sent to the server, e.g. ``"text-embedding-3-small"``.
    base_url : str, optional
        API root; default ``PGMEM_OPENAI_BASE_URL``, else ``OPENAI_BASE_URL``, else
        ``https://api.openai.com/v1``.
    api_key : str, optional
        Bearer token; default ``PGMEM_OPENAI_API_KEY``, else ``OPENAI_API_KEY``, else a
        placeholder that local servers ignore (the client requires one). The key never
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
        Seconds to wait for each request attempt (default 30; at most 86,400).
    max_retries : int
        Retries after the first attempt on HTTP 408, 409, 429, 5xx, connection errors
        and timeouts (default 5), with the client's exponential backoff (0.5 s doubling
        up to 8 s, with jitter) or the server's ``Retry-After`` when it asks for at most
        two minutes; a server asking for longer, and other 4xx responses, fail at once.

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
    ) -> None:
        if not isinstance(model, str) or text_problem(model, max_chars=MAX_MODEL_CHARS):
            raise ConfigurationError(f"OpenAIEmbedder model must be a non-empty name, got {describe_value(model)}")
        self._settings = client_settings(
            "OpenAIEmbedder",
            base_url=base_url,
            api_key=api_key,
            timeout=timeout,
            max_retries=max_retries,
            base_url_variables=BASE_URL_VARIABLES,
            api_key_variables=API_KEY_VARIABLES,
            default_base_url=DEFAULT_BASE_URL,
        )
        if dimension is not None:
            whole("OpenAIEmbedder dimension", dimension, 1, MAX_DIMENSION)
        whole("OpenAIEmbedder batch_size", batch_size, 1)
        self.model = model.strip()
        self.name = f"openai:{self.model}"
        self.endpoint = self._settings.base_url + "/embeddings"
        self.batch_size = batch_size
        self.timeout = self._settings.timeout
        self.max_retries = max_retries
        self._dimension = dimension
        self._lock = threading.Lock()
        self._client: openai.OpenAI | None = None
        # An asyncio client's connections belong to the loop that opened them.
        self._async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, openai.AsyncOpenAI] = (
            weakref.WeakKeyDictionary()
        )

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(model={self.model!r}, endpoint={self.endpoint!r})"

    @property
    def dimension(self) -> int:
        """Vector length; discovered with a one-text request if not known yet."""
        if self._dimension is None:
            self.embed([_PROBE_TEXT])
        return self._known_dimension()

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
        client = self._sync_client()
        batches = []
        for batch in self._batches(items):
            with self._failures():
                response = client.embeddings.with_raw_response.create(**self._request(batch))
            batches.append(self._vectors(response.content, batch))
        return np.concatenate(batches, axis=0)

    async def aembed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` on the asyncio client: :meth:`embed` for an async caller.

        The event loop is never blocked (an unknown dimension is probed with an async
        request too). Call :meth:`aclose` before the loop ends to close its connections.

        Raises
        ------
        EmbeddingError
            As :meth:`embed`.
        """
        items = as_text_list(texts)
        if not items:
            if self._dimension is None:
                await self.aembed([_PROBE_TEXT])
            return np.empty((0, self._known_dimension()), dtype=np.float32)
        client = await self._async_client()
        batches = []
        for batch in self._batches(items):
            with self._failures():
                response = await client.embeddings.with_raw_response.create(**self._request(batch))
            batches.append(self._vectors(response.content, batch))
        return np.concatenate(batches, axis=0)

    def close(self) -> None:
        """Close the synchronous client's connections (a later call opens new ones)."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    async def aclose(self) -> None:
        """Close the asyncio client of the running event loop."""
        client = self._async_clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.close()

    def _sync_client(self) -> openai.OpenAI:
        with self._lock:
            if self._client is None:
                self._client = self._settings.sync_client()
            return self._client

    async def _async_client(self) -> openai.AsyncOpenAI:
        loop = asyncio.get_running_loop()
        client = self._async_clients.get(loop)
        if client is None:
            # Built in a worker thread: the first one imports openai and loads the CA
            # bundle, seconds during which the event loop would otherwise stand still.
            client = await asyncio.to_thread(self._settings.async_client)
            client = self._async_clients.setdefault(loop, client)
        return client

    def _batches(self, items: list[str]) -> Iterator[list[str]]:
        for start in range(0, len(items), self.batch_size):
            yield items[start : start + self.batch_size]

    def _request(self, batch: list[str]) -> dict[str, Any]:
        # "float": the client would ask for base64, which local servers rarely speak.
        return {"model": self.model, "input": batch, "encoding_format": "float"}

    @contextlib.contextmanager
    def _failures(self) -> Iterator[None]:
        import openai

        try:
            yield
        except openai.OpenAIError as exc:
            raise EmbeddingError(
                f"embedder {self.name!r}: POST {self.endpoint} failed: {self._settings.describe_failure(exc)}"
            ) from exc

    def _known_dimension(self) -> int:
        if self._dimension is None:  # a successful call always sets it
            raise EmbeddingError(f"embedder {self.name!r}: could not determine the dimension")
        return self._dimension

    def _vectors(self, body: bytes, batch: list[str]) -> Vectors:
        try:
            payload = json.loads(body)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise EmbeddingError(
                f"embedder {self.name!r}: response from {self.endpoint} is not JSON: {self._settings.excerpt(body)}"
            ) from exc
        rows = self._vectors_from(payload, len(batch))
        width = len(rows[0])
        with self._lock:
            if self._dimension is None:
                self._dimension = width
        if width != self._dimension:
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


register_embedder("openai", lambda model: OpenAIEmbedder(model or DEFAULT_MODEL), option="<model>")
