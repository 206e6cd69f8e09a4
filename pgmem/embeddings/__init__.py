"""Text embedders: the :class:`Embedder` protocol, its three implementations, the registry.

:class:`MiniLMEmbedder` (the default, int8 ONNX on the CPU), :class:`HashingEmbedder`
(deterministic, no model; for tests and minimal installs) and :class:`OpenAIEmbedder`
(any OpenAI-compatible HTTP endpoint). :func:`get_embedder` builds one from a spec
string such as ``"minilm"``, ``"hashing:256"`` or ``"openai:text-embedding-3-small"``;
each implementation registers its kind on import, and :func:`register_embedder` adds
an application's own.
"""

from __future__ import annotations

from pgmem.embeddings.base import Embedder, aembed_unique, embed_unique
from pgmem.embeddings.cached import CachedEmbedder
from pgmem.embeddings.hashing import HashingEmbedder
from pgmem.embeddings.minilm import MiniLMEmbedder
from pgmem.embeddings.openai_http import OpenAIEmbedder
from pgmem.embeddings.registry import (
    default_embedder_spec,
    get_embedder,
    register_embedder,
    registered_kinds,
    resolve_embedder,
)

__all__ = [
    "CachedEmbedder",
    "Embedder",
    "HashingEmbedder",
    "MiniLMEmbedder",
    "OpenAIEmbedder",
    "aembed_unique",
    "default_embedder_spec",
    "embed_unique",
    "get_embedder",
    "register_embedder",
    "registered_kinds",
    "resolve_embedder",
]
