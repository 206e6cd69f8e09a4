"""The embedder contract and the one validation boundary for vectors.

Every embedder turns a batch of texts into a float32 matrix of unit rows. Callers go
through :func:`embed_unique`, which embeds each distinct text once and checks what
came back, so a misbehaving embedder fails loudly here instead of writing NaNs or
zero vectors into an HNSW index.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from pgmem.errors import EmbeddingError, InputError

Vectors = npt.NDArray[np.float32]

#: Largest embedding dimension pgmem stores: pgvector's HNSW index takes halfvec up to
#: 4,000 dimensions (the CHECK on ``pgmem.embedding_models`` says the same).
MAX_DIMENSION = 4_000


@runtime_checkable
class Embedder(Protocol):
    """What pgmem needs from an embedding model.

    Attributes
    ----------
    name : str
        Stable model id recorded in the database with every vector (for example
        ``"all-MiniLM-L6-v2-onnx-int8"``); a namespace refuses vectors of another name.
    dimension : int
        Length of every vector.

    Notes
    -----
    ``name`` and ``dimension`` are read-only properties here so that plain attributes,
    class constants and lazily computed properties all satisfy the protocol. An
    embedder may also define ``async def aembed(texts)``, the same as ``embed`` for an
    asyncio caller; :func:`aembed_unique` uses it when present.
    """

    @property
    def name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts``.

        Parameters
        ----------
        texts : sequence of str
            The texts, in order; may contain duplicates and empty strings.

        Returns
        -------
        numpy.ndarray
            float32 array of shape ``(len(texts), dimension)``; every row finite and
            L2-normalised.
        """
        ...


def as_text_list(texts: Sequence[str]) -> list[str]:
    """Return ``texts`` as a list, or raise InputError if it is not a sequence of str."""
    # A bare string is a Sequence[str] too; embedding it character by character is
    # never what the caller meant.
    if isinstance(texts, str | bytes):
        raise InputError("texts must be a sequence of strings, got a single string")
    items = list(texts)
    for position, text in enumerate(items):
        if not isinstance(text, str):
            raise InputError(f"texts[{position}] must be a str, got {type(text).__name__}")
    return items


def normalize_rows(matrix: npt.NDArray[np.floating], *, source: str) -> Vectors:
    """Return ``matrix`` as float32 with unit rows; EmbeddingError if a row is unusable.

    ``source`` names the embedder in the error message.
    """
    rows = np.asarray(matrix, dtype=np.float64)
    if rows.ndim != 2:
        raise EmbeddingError(f"embedder {source!r} returned an array of shape {rows.shape}")
    bad = ~np.isfinite(rows).all(axis=1)
    if bad.any():
        raise EmbeddingError(f"embedder {source!r} returned a non-finite vector for text #{int(np.argmax(bad))}")
    norms = np.linalg.norm(rows, axis=1)
    zero = norms == 0.0
    if zero.any():
        raise EmbeddingError(
            f"embedder {source!r} returned a zero vector for text #{int(np.argmax(zero))};"
            " cosine similarity is undefined for it"
        )
    unit: Vectors = (rows / norms[:, None]).astype(np.float32)
    return unit


def embed_unique(embedder: Embedder, texts: Sequence[str]) -> Vectors:
    """Embed each distinct text once and return rows aligned with ``texts``.

    Parameters
    ----------
    embedder : Embedder
        The model to call; it sees every distinct text exactly once, in first-seen order.
    texts : sequence of str
        Texts to embed; duplicates share one model call.

    Returns
    -------
    numpy.ndarray
        float32 array of shape ``(len(texts), embedder.dimension)`` with unit rows.

    Raises
    ------
    InputError
        ``texts`` is not a sequence of str.
    EmbeddingError
        The embedder raised it, or returned something other than one finite, non-zero
        vector of length ``embedder.dimension`` per distinct text.
    """
    items = as_text_list(texts)
    if not items:
        return np.empty((0, embedder.dimension), dtype=np.float32)
    distinct = list(dict.fromkeys(items))
    return _aligned(embedder, items, distinct, embedder.embed(distinct))


async def aembed_unique(embedder: Embedder, texts: Sequence[str]) -> Vectors:
    """:func:`embed_unique` for an asyncio caller; the event loop never waits on a model.

    An embedder with an ``async def aembed(texts)`` method (such as
    :class:`~pgmem.embeddings.OpenAIEmbedder`) is awaited; any other runs its ``embed``
    in a worker thread. The same distinct-text call, alignment and checks apply.

    Raises
    ------
    InputError, EmbeddingError
        As :func:`embed_unique`.
    """
    items = as_text_list(texts)
    if not items:
        # Reading the dimension may send a probe request; keep it off the loop too.
        dimension = await asyncio.to_thread(lambda: embedder.dimension)
        return np.empty((0, dimension), dtype=np.float32)
    distinct = list(dict.fromkeys(items))
    aembed = getattr(embedder, "aembed", None)
    if aembed is not None and inspect.iscoroutinefunction(aembed):
        output = await aembed(distinct)
    else:
        output = await asyncio.to_thread(embedder.embed, distinct)
    return _aligned(embedder, items, distinct, output)


def _aligned(embedder: Embedder, items: list[str], distinct: list[str], output: object) -> Vectors:
    """Check the embedder's ``output`` for ``distinct`` and return rows aligned with ``items``."""
    name = embedder.name
    # Read after the call: an embedder may learn its dimension from its first answer
    # (OpenAIEmbedder), and reading it earlier would cost an extra probe request.
    dimension = embedder.dimension
    if not isinstance(output, np.ndarray):
        raise EmbeddingError(f"embedder {name!r} returned {type(output).__name__}, expected a numpy array")
    expected = (len(distinct), dimension)
    if output.shape != expected:
        raise EmbeddingError(
            f"embedder {name!r} returned shape {output.shape} for {len(distinct)} distinct"
            f" texts; expected {expected} (dimension {dimension})"
        )
    if not np.issubdtype(output.dtype, np.floating):
        raise EmbeddingError(f"embedder {name!r} returned dtype {output.dtype}, expected floats")
    # Renormalising costs little and makes the unit-row guarantee hold even for an
    # embedder that is off by rounding.
    unit = normalize_rows(output, source=name)
    position = {text: index for index, text in enumerate(distinct)}
    return unit[[position[text] for text in items]]
