"""Text embedders: the :class:`Embedder` protocol and its three implementations.

:class:`MiniLMEmbedder` (the default, int8 ONNX on the CPU), :class:`HashingEmbedder`
(deterministic, no model; for tests and minimal installs) and :class:`OpenAIEmbedder`
(any OpenAI-compatible HTTP endpoint). :func:`get_embedder` builds one from a spec
string such as ``"minilm"``, ``"hashing:256"`` or ``"openai:text-embedding-3-small"``.
"""

from __future__ import annotations

from pgmem.embeddings.base import (
    Embedder,
    default_embedder_spec,
    embed_unique,
    get_embedder,
    resolve_embedder,
)
from pgmem.embeddings.cached import CachedEmbedder
from pgmem.embeddings.hashing import HashingEmbedder
from pgmem.embeddings.minilm import MiniLMEmbedder
from pgmem.embeddings.openai_http import OpenAIEmbedder

__all__ = [
    "CachedEmbedder",
    "Embedder",
    "HashingEmbedder",
    "MiniLMEmbedder",
    "OpenAIEmbedder",
    "default_embedder_spec",
    "embed_unique",
    "get_embedder",
    "resolve_embedder",
]
