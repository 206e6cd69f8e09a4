"""A deterministic embedder without a model: signed feature hashing of words and n-grams."""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from pgmem.embeddings.base import MAX_DIMENSION, Vectors, as_text_list
from pgmem.embeddings.registry import register_embedder
from pgmem.errors import ConfigurationError
from pgmem.validate import describe_value, whole

DEFAULT_DIMENSION = 384

# Word unigrams carry the meaning; bigrams add a little word order; character 3-grams
# let inflections and typos ("sitting"/"sits") overlap. A word yields several 3-grams,
# hence their lower weight, so they refine rather than dominate the vector.
UNIGRAM_WEIGHT = 1.0
BIGRAM_WEIGHT = 0.5
TRIGRAM_WEIGHT = 0.25

_WORD = re.compile(r"\w+")
# Keyed so the buckets belong to this scheme only; bump with the name's version.
_HASH_KEY = b"pgmem-hashing-v1"
_EMPTY_FEATURE = "\x00empty"


@lru_cache(maxsize=1 << 16)
def _slot(feature: str, dimension: int) -> tuple[int, float]:
    # blake2b, not hash(): str hashes are salted per process, and vectors stored in the
    # database must come out the same in every process.
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8, key=_HASH_KEY).digest()
    value = int.from_bytes(digest, "little")
    sign = 1.0 if value >> 63 else -1.0
    return value % dimension, sign


def _features(text: str) -> Counter[str]:
    words = _WORD.findall(text.lower())
    features: Counter[str] = Counter()
    for word in words:
        features["w:" + word] += 1
        padded = f"<{word}>"
        for start in range(len(padded) - 2):
            features["c:" + padded[start : start + 3]] += 1
    for first, second in itertools.pairwise(words):
        features[f"b:{first} {second}"] += 1
    return features


_WEIGHTS = {"w": UNIGRAM_WEIGHT, "b": BIGRAM_WEIGHT, "c": TRIGRAM_WEIGHT}


class HashingEmbedder:
    """Deterministic embeddings by signed feature hashing; no model, no dependencies.

    Each text is lower-cased and split into words; its word unigrams, word bigrams and
    the character 3-grams of each word are hashed (keyed blake2b) into ``dimension``
    signed buckets with sublinear term frequency ``1 + log(tf)``, and the vector is
    L2-normalised. A text without any word character gets one fixed unit vector, so
    cosine similarity stays defined.

    Meant for tests and minimal installs: it matches shared words and spellings only,
    so its retrieval quality is far below a real sentence-embedding model such as
    the default :class:`~pgmem.embeddings.MiniLMEmbedder`.

    Parameters
    ----------
    dimension : int
        Vector length (default 384, at least 2).

    Attributes
    ----------
    name : str
        ``"hashing-v1-<dimension>"``; vectors of different dimensions never mix.
    dimension : int
    """

    def __init__(self, dimension: int = DEFAULT_DIMENSION) -> None:
        whole("HashingEmbedder dimension", dimension, 2, MAX_DIMENSION)
        self.dimension = dimension
        self.name = f"hashing-v1-{dimension}"

    def __repr__(self) -> str:
        return f"HashingEmbedder(dimension={self.dimension})"

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts``; see :meth:`pgmem.embeddings.Embedder.embed`."""
        items = as_text_list(texts)
        vectors = np.zeros((len(items), self.dimension), dtype=np.float64)
        for row, text in enumerate(items):
            features = _features(text)
            if not features:
                index, sign = _slot(_EMPTY_FEATURE, self.dimension)
                vectors[row, index] = sign
                continue
            for feature, count in features.items():
                index, sign = _slot(feature, self.dimension)
                vectors[row, index] += sign * _WEIGHTS[feature[0]] * (1.0 + math.log(count))
            norm = float(np.linalg.norm(vectors[row]))
            if norm == 0.0:
                # Features whose signed weights cancel exactly in every bucket: vanishingly
                # rare, but a zero vector would break cosine, so fall back like empty text.
                index, sign = _slot(_EMPTY_FEATURE, self.dimension)
                vectors[row, index] = sign
                continue
            vectors[row] /= norm
        return vectors.astype(np.float32)


def _from_option(option: str) -> HashingEmbedder:
    """``hashing`` and ``hashing:<dimension>`` specs."""
    if not option:
        return HashingEmbedder(DEFAULT_DIMENSION)
    # ASCII digits only: str.isdigit() also accepts "²", which int() refuses, and a
    # number of thousands of digits, which int() refuses past 4,300.
    if not (option.isascii() and option.isdigit() and len(option) <= len(str(MAX_DIMENSION))):
        raise ConfigurationError(
            f"embedder spec {describe_value('hashing:' + option)}: the hashing dimension must be a whole number"
            f" in [2, {MAX_DIMENSION}], got {describe_value(option)}"
        )
    return HashingEmbedder(int(option))


register_embedder("hashing", _from_option, option="<dimension>")
