"""The words of a pool's notes, read once per pool (the family alarm and the packer share them).

A note's words are the ``\\w+`` runs of its lower-cased text; its *content* words are
those that are not stop words. The family alarm compares every note's content words
with the question's and with every other note's (word Jaccard); the packer compares
the words of the notes it reaches with those already packed. Tokenising the pool once
and counting shared words by sorting word ids (no BLAS call, no pairwise Python loop)
keeps the whole read path well under a millisecond for a 128-row pool.

Pure numpy and :mod:`re`: no I/O.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from pgmem.ingestion.entities import STOPWORDS

_WORD = re.compile(r"\w+", re.UNICODE)
# For ASCII text, \w is [A-Za-z0-9_]: mapping every other ASCII character to a space and
# splitting finds the same runs as the regex, about 2.5 times faster.
_ASCII_NON_WORD_TO_SPACE = str.maketrans(
    {chr(code): " " for code in range(128) if not (chr(code).isalnum() or chr(code) == "_")}
)

_Array = npt.NDArray[np.float64]
_Ints = npt.NDArray[np.int64]


def word_list(text: str) -> list[str]:
    """The ``\\w+`` runs of ``text`` lower-cased, in order (repeats kept)."""
    lowered = text.lower()
    if lowered.isascii():
        return lowered.translate(_ASCII_NON_WORD_TO_SPACE).split()
    return _WORD.findall(lowered)


def content_words(text: str) -> frozenset[str]:
    """Lower-cased ``\\w+`` words of ``text`` without stop words."""
    return frozenset(word_list(text)).difference(STOPWORDS)


class PoolWords:
    """Each note's words and content words, tokenised once.

    Parameters
    ----------
    texts : sequence of str
        The pool's note texts, in candidate order.
    """

    def __init__(self, texts: Sequence[str]) -> None:
        self.size = len(texts)
        self._lists = [word_list(text) for text in texts]
        self._sets: dict[int, frozenset[str]] = {}
        tokens = list(itertools.chain.from_iterable(self._lists))
        vocabulary = dict.fromkeys(tokens)
        self._ids = dict(zip(vocabulary, range(len(vocabulary)), strict=True))
        width = max(len(vocabulary), 1)
        ids = np.fromiter(map(self._ids.__getitem__, tokens), dtype=np.int64, count=len(tokens))
        rows = np.repeat(np.arange(self.size, dtype=np.int64), [len(words) for words in self._lists])
        stop = np.fromiter(map(STOPWORDS.__contains__, vocabulary), dtype=bool, count=len(vocabulary))
        content = ~stop[ids] if len(tokens) else np.zeros(0, dtype=bool)
        # One entry per (note, distinct content word), sorted by note.
        entries = np.unique(rows[content] * width + ids[content])
        self.content_rows: _Ints = entries // width
        self.content_ids: _Ints = entries % width
        self.content_sizes: _Array = np.bincount(self.content_rows, minlength=self.size).astype(np.float64)

    def words(self, row: int) -> frozenset[str]:
        """All the words of note ``row`` (stop words included)."""
        found = self._sets.get(row)
        if found is None:
            found = self._sets[row] = frozenset(self._lists[row])
        return found

    def echo(self, question: frozenset[str]) -> _Array:
        """Share of ``question``'s words each note's content words contain (0s for no words)."""
        if not question:
            return np.zeros(self.size)
        asked = [self._ids[word] for word in question if word in self._ids]
        hits = np.isin(self.content_ids, asked)
        return np.bincount(self.content_rows[hits], minlength=self.size) / len(question)

    def nearest_duplicate(self, documents: Sequence[str]) -> _Array:
        """For each note, the highest content-word Jaccard with a note of another document."""
        count = self.size
        if count < 2:
            return np.zeros(count)
        shared = self._shared_counts()
        union = self.content_sizes[:, None] + self.content_sizes[None, :] - shared
        jaccard = np.divide(shared, union, out=np.zeros_like(shared), where=union > 0)
        number = {document: index for index, document in enumerate(dict.fromkeys(documents))}
        codes = np.fromiter(map(number.__getitem__, documents), dtype=np.int64, count=count)
        jaccard[codes[:, None] == codes[None, :]] = 0.0
        return np.asarray(jaccard.max(axis=1), dtype=np.float64)

    def _shared_counts(self) -> _Array:
        """``shared[i, j]``: how many content words notes i and j have in common (i != j exact)."""
        count = self.size
        order = np.argsort(self.content_ids, kind="stable")
        word = self.content_ids[order]
        row = self.content_rows[order]
        # Runs of one word: a word in k notes makes k*k (note, note) pairs.
        starts = np.flatnonzero(np.concatenate(([True], word[1:] != word[:-1])))
        lengths = np.diff(np.append(starts, len(word)))
        shared_words = lengths > 1
        starts, lengths = starts[shared_words], lengths[shared_words]
        if not len(starts):
            return np.zeros((count, count))
        # Every entry of a shared word, with its run's start and length.
        run_start = np.repeat(starts, lengths)
        run_length = np.repeat(lengths, lengths)
        entry = run_start + _offsets(lengths)
        # Each entry paired with every entry of its run.
        left = np.repeat(entry, run_length)
        right = np.repeat(run_start, run_length) + _offsets(run_length)
        pairs = np.bincount(row[left] * count + row[right], minlength=count * count)
        return pairs.reshape(count, count).astype(np.float64)


def _offsets(lengths: _Ints) -> _Ints:
    """``0..n-1`` for each ``n`` of ``lengths``, concatenated."""
    ends = np.cumsum(lengths)
    return np.arange(int(ends[-1]), dtype=np.int64) - np.repeat(ends - lengths, lengths)
