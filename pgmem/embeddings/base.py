"""The embedder contract, the one validation boundary for vectors, and the spec parser.

Every embedder turns a batch of texts into a float32 matrix of unit rows. Callers go
through :func:`embed_unique`, which embeds each distinct text once and checks what
came back, so a misbehaving embedder fails loudly here instead of writing NaNs or
zero vectors into an HNSW index.
"""

from __future__ import annotations

import functools
import inspect
import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from pgmem.errors import ConfigurationError, EmbeddingError, InputError
from pgmem.validate import describe_value

if TYPE_CHECKING:
    from pgmem.embeddings.minilm import MiniLMEmbedder

Vectors = npt.NDArray[np.float32]

ENVIRONMENT_VARIABLE = "PGMEM_EMBEDDER"
DEFAULT_SPEC = "minilm"
DEFAULT_OPENAI_MODEL = "text-embedding-3-small"
SPEC_CHOICES = "'default', 'minilm', 'hashing', 'hashing:<dimension>', 'openai', 'openai:<model>'"
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
    class constants and lazily computed properties all satisfy the protocol.
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
    name = embedder.name
    if not items:
        return np.empty((0, embedder.dimension), dtype=np.float32)
    distinct = list(dict.fromkeys(items))
    position = {text: index for index, text in enumerate(distinct)}
    output = embedder.embed(distinct)
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
    return unit[[position[text] for text in items]]


def default_embedder_spec() -> str:
    """Return the embedder spec from ``PGMEM_EMBEDDER``, or ``"minilm"`` when unset or empty."""
    return os.environ.get(ENVIRONMENT_VARIABLE, "").strip() or DEFAULT_SPEC


def resolve_embedder(choice: Embedder | str | None) -> Embedder:
    """The embedder asked for; when ``choice`` is None, the one ``$PGMEM_EMBEDDER`` names,
    else the bundled MiniLM. This is how the public API and the CLI pick one."""
    return get_embedder(choice if choice is not None else default_embedder_spec())


_bundled_lock = threading.Lock()
_bundled: MiniLMEmbedder | None = None


def _bundled_minilm() -> MiniLMEmbedder:
    # One instance per process: the ONNX session is ~25 MB and loading it twice would
    # double memory and start-up time for no benefit.
    global _bundled
    with _bundled_lock:
        if _bundled is None:
            from pgmem.embeddings.minilm import MiniLMEmbedder

            _bundled = MiniLMEmbedder()
        return _bundled


def _looks_like_embedder(candidate: object) -> bool:
    # isinstance() against a runtime_checkable Protocol calls hasattr() on Python 3.11,
    # which would evaluate a lazy property such as OpenAIEmbedder.dimension (a network
    # probe). getattr_static checks the same members without running any code.
    for member in ("name", "dimension", "embed"):
        try:
            inspect.getattr_static(candidate, member)
        except AttributeError:
            return False
    return callable(getattr(candidate, "embed", None))


def get_embedder(spec: str | Embedder | None) -> Embedder:
    """Return the embedder named by ``spec``.

    Parameters
    ----------
    spec : str, Embedder or None
        ``None``, ``"default"`` or ``"minilm"``: the bundled MiniLM model (one shared
        instance per process). ``"hashing"`` or ``"hashing:<dimension>"``: a
        :class:`~pgmem.embeddings.HashingEmbedder`. ``"openai"`` or
        ``"openai:<model>"``: an :class:`~pgmem.embeddings.OpenAIEmbedder` configured
        from the environment (default model ``text-embedding-3-small``). An object
        that already implements :class:`Embedder` is returned unchanged. The
        environment is not consulted for the spec itself; pass
        :func:`default_embedder_spec` to honour ``PGMEM_EMBEDDER``.

    Returns
    -------
    Embedder

    Raises
    ------
    ConfigurationError
        ``spec`` names no known embedder or carries an invalid option.
    """
    if spec is None:
        return _bundled_minilm()
    if not isinstance(spec, str):
        if _looks_like_embedder(spec):
            return spec
        raise ConfigurationError(f"embedder must be a spec string or an Embedder, got {type(spec).__name__}")
    return _from_spec(spec)


@functools.lru_cache(maxsize=32)
def _from_spec(spec: str) -> Embedder:
    # One instance per spec and process: an OpenAI embedder discovers its dimension
    # with a request, which must not be repeated for every pack.
    kind, _, option = spec.strip().partition(":")
    kind = kind.lower()
    option = option.strip()
    if kind in ("default", "minilm") and not option:
        return _bundled_minilm()
    if kind == "hashing":
        from pgmem.embeddings.hashing import DEFAULT_DIMENSION, HashingEmbedder

        if not option:
            return HashingEmbedder(DEFAULT_DIMENSION)
        # ASCII digits only: str.isdigit() also accepts "²", which int() refuses, and a
        # number of thousands of digits, which int() refuses past 4,300.
        if not (option.isascii() and option.isdigit() and len(option) <= len(str(MAX_DIMENSION))):
            raise ConfigurationError(
                f"embedder spec {describe_value(spec)}: the hashing dimension must be a whole number"
                f" in [2, {MAX_DIMENSION}], got {describe_value(option)}"
            )
        return HashingEmbedder(int(option))
    if kind == "openai":
        from pgmem.embeddings.openai_http import OpenAIEmbedder

        return OpenAIEmbedder(option or DEFAULT_OPENAI_MODEL)
    raise ConfigurationError(f"unknown embedder spec {spec!r}; choose one of {SPEC_CHOICES}")
