"""An in-memory cache in front of any embedder, for processes that embed the same texts
again and again (the evaluation harness ingests one corpus under many conditions)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from pgmem.embeddings.base import Embedder, Vectors, embed_unique
from pgmem.validate import whole


class CachedEmbedder:
    """Wraps ``embedder``; texts seen before are answered from memory.

    The name and dimension are the wrapped model's, so vectors written through the
    cache are indistinguishable from the model's own (they are the model's own). The
    cache holds at most ``max_entries`` vectors, evicting the least recently used;
    ``hits`` and ``misses`` count texts.
    """

    def __init__(self, embedder: Embedder, max_entries: int = 200_000) -> None:
        whole("max_entries", max_entries, 1)
        self._embedder = embedder
        self._max_entries = max_entries
        self._vectors: OrderedDict[str, Vectors] = OrderedDict()
        self.hits = 0
        self.misses = 0

    @property
    def name(self) -> str:
        return self._embedder.name

    @property
    def dimension(self) -> int:
        return self._embedder.dimension

    def embed(self, texts: Sequence[str]) -> Vectors:
        missing = [text for text in dict.fromkeys(texts) if text not in self._vectors]
        self.misses += len(missing)
        self.hits += len(texts) - len(missing)
        if missing:
            # embed_unique validates and normalises what the model returned.
            for text, vector in zip(missing, embed_unique(self._embedder, missing), strict=True):
                self._vectors[text] = vector
        rows = []
        for text in texts:
            self._vectors.move_to_end(text)
            rows.append(self._vectors[text])
        while len(self._vectors) > self._max_entries:
            self._vectors.popitem(last=False)
        if not rows:
            return np.empty((0, self.dimension), dtype=np.float32)
        return np.stack(rows)
