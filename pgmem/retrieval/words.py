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
import os
import re
import threading
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from pgmem.ingestion.entities import STOPWORDS

_WORD = re.compile(r"\w+", re.UNICODE)
# For ASCII text, \w is [A-Za-z0-9_]: mapping every other byte to a space and splitting
# finds the same runs as the regex, about four times faster (bytes.translate is a plain
# table lookup; str.translate is not).
_ASCII_NON_WORD_TO_SPACE = bytes(code if chr(code).isalnum() or chr(code) == "_" else 32 for code in range(128)) + (
    b" " * 128
)
#: Up to this many question words, echo compares word ids one by one.
_FEW_WORDS = 16
_Array = npt.NDArray[np.float64]
_Ints = npt.NDArray[np.int64]


def word_list(text: str) -> list[str]:
    """The ``\\w+`` runs of ``text`` lower-cased, in order (repeats kept)."""
    lowered = text.lower()
    if lowered.isascii():
        return lowered.encode("ascii").translate(_ASCII_NON_WORD_TO_SPACE).decode("ascii").split()
    return _WORD.findall(lowered)


def content_words(text: str) -> frozenset[str]:
    """Lower-cased ``\\w+`` words of ``text`` without stop words."""
    return frozenset(word_list(text)).difference(STOPWORDS)


class _ContentIds:
    """A process-wide memo: a note text -> its distinct content words, as word ids.

    Notes are immutable and the same notes come back in pool after pool, so each text is
    tokenised once per process, not once per pack. Ids come from one vocabulary; when
    the memo holds more than ``max_characters`` of text or ``max_words`` words, both are
    cleared together (never one without the other: a pool's ids must all come from the
    same vocabulary). The ids never reach an output: they only say which words are equal.
    """

    def __init__(self, max_characters: int = 8_000_000, max_words: int = 1 << 20) -> None:
        self.max_characters = max_characters
        self.max_words = max_words
        self._lock = threading.Lock()
        self._vocabulary: dict[str, int] = {}
        self._texts: dict[str, tuple[int, ...]] = {}
        self._characters = 0

    def reset_lock(self) -> None:
        """A fresh lock (in a forked child, where another thread may have held the parent's)."""
        self._lock = threading.Lock()

    def clear(self) -> None:
        """Forget every text and word (the next lookups tokenise again)."""
        with self._lock:
            self._forget()

    def _forget(self) -> None:
        self._texts.clear()
        self._vocabulary.clear()
        self._characters = 0

    def lookup(self, texts: Sequence[str], question: frozenset[str]) -> tuple[list[tuple[int, ...]], list[int]]:
        """Each text's content word ids, and the ids of the ``question`` words seen in any text."""
        with self._lock:
            if self._characters > self.max_characters or len(self._vocabulary) > self.max_words:
                self._forget()
            known = self._texts
            found = [known.get(text) for text in texts]
            missing = [text for text, ids in zip(texts, found, strict=True) if ids is None]
            if missing:
                self._learn(missing)
                found = [known[text] for text in texts]
            vocabulary = self._vocabulary
            asked = [vocabulary[word] for word in question if word in vocabulary]
        return found, asked  # type: ignore[return-value]  # every text is known now

    def _learn(self, texts: list[str]) -> None:
        """Tokenise ``texts`` (new ones) and give their new words the next ids."""
        vocabulary = self._vocabulary
        contents = [content_words(text) for text in texts]
        # Set order: ids only ever say which words are equal, never reach an output.
        unseen = set(itertools.chain.from_iterable(contents)).difference(vocabulary)
        vocabulary.update(zip(unseen, itertools.count(len(vocabulary))))
        for text, words in zip(texts, contents, strict=True):
            self._texts[text] = tuple(map(vocabulary.__getitem__, words))
        self._characters += sum(map(len, texts))


_CONTENT_IDS = _ContentIds()
os.register_at_fork(after_in_child=_CONTENT_IDS.reset_lock)


class PoolWords:
    """Each note's content words (as ids) and, on demand, all its words.

    Parameters
    ----------
    texts : sequence of str
        The pool's note texts, in candidate order.
    question : str
        The question the pool was searched for (the echo is measured against it).
    """

    def __init__(self, texts: Sequence[str], question: str = "") -> None:
        self.size = len(texts)
        self._texts = texts
        self._sets: dict[int, frozenset[str]] = {}
        self._question = content_words(question)
        per_note, self._asked = _CONTENT_IDS.lookup(texts, self._question)
        lengths = [len(ids) for ids in per_note]
        # One entry per (note, distinct content word), in note order.
        flat = itertools.chain.from_iterable(per_note)
        self.content_ids: _Ints = np.fromiter(flat, dtype=np.int64, count=sum(lengths))
        self.content_rows: _Ints = np.repeat(np.arange(self.size, dtype=np.int64), lengths)
        self.content_sizes: _Array = np.array(lengths, dtype=np.float64)

    def words(self, row: int) -> frozenset[str]:
        """All the words of note ``row`` (stop words included)."""
        found = self._sets.get(row)
        if found is None:
            found = self._sets[row] = frozenset(word_list(self._texts[row]))
        return found

    def echo(self) -> _Array:
        """Share of the question's content words each note contains (0s for a question without any)."""
        if not self._question:
            return np.zeros(self.size)
        if len(self._asked) > _FEW_WORDS:
            hits = np.isin(self.content_ids, self._asked)
        else:
            # A question has a handful of words: one comparison each beats np.isin's sorting.
            hits = np.zeros(len(self.content_ids), dtype=bool)
            for word in self._asked:
                hits |= self.content_ids == word
        return np.bincount(self.content_rows[hits], minlength=self.size) / len(self._question)

    def nearest_duplicate(self, documents: Sequence[str]) -> _Array:
        """For each note, the highest content-word Jaccard with a note of another document."""
        return self.nearest_duplicates(documents)[0]

    def nearest_duplicates(
        self, documents: Sequence[str], families: Sequence[str] | None = None
    ) -> tuple[_Array, _Array]:
        """Each note's highest content-word Jaccard with a note of another document, and the same
        among notes of its own family (``families``; zeros when not given).
        """
        count = self.size
        if count < 2:
            return np.zeros(count), np.zeros(count)
        shared = self._shared_above_diagonal()
        union = self.content_sizes[:, None] + self.content_sizes[None, :] - shared
        jaccard = np.divide(shared, union, out=np.zeros(shared.shape), where=union > 0)
        document = _codes(documents)
        jaccard[document[:, None] == document[None, :]] = 0.0
        # Pairs are counted above the diagonal only: note i's partners are its row and column.
        nearest: _Array = np.maximum(jaccard.max(axis=1), jaccard.max(axis=0))
        if families is None:
            return nearest, np.zeros(count)
        family = _codes(families)
        jaccard[family[:, None] != family[None, :]] = 0.0
        within: _Array = np.maximum(jaccard.max(axis=1), jaccard.max(axis=0))
        return nearest, within

    def _shared_above_diagonal(self) -> _Ints:
        """``shared[i, j]`` for i < j: how many content words notes i and j have in common (0 elsewhere)."""
        count = self.size
        order = np.argsort(self.content_ids, kind="stable")
        word = self.content_ids[order]
        row = self.content_rows[order]
        # Runs of one word, notes ascending within a run (the sort is stable): each entry
        # pairs with the entries after it in its run, so every pair i < j is counted once.
        entries = np.arange(len(word))
        starts = np.flatnonzero(np.concatenate(([True], word[1:] != word[:-1])))
        lengths = np.diff(np.append(starts, len(word)))
        shared = np.zeros((count, count), dtype=np.int64)
        common = _common_runs(lengths)
        if len(common):
            # A word in many notes (a speaker's name in every turn) would make k*k pairs:
            # such words are counted as bits instead, popcount of each pair's AND.
            in_common = np.zeros(len(lengths), dtype=bool)
            in_common[common] = True
            bit = np.zeros(len(lengths))
            bit[common] = 2.0 ** np.arange(len(common))  # exact: at most 52 distinct powers
            masks = np.bincount(row, weights=np.repeat(bit, lengths), minlength=count).astype(np.uint64)
            shared += np.triu(_popcount(masks[:, None] & masks[None, :]), 1)
            lengths_paired = np.where(in_common, 0, lengths)
        else:
            lengths_paired = lengths
        after = np.maximum(np.repeat(starts + lengths_paired, lengths) - 1 - entries, 0)
        total = int(after.sum())
        if not total:
            return shared
        # The partners of entry e are e+1 .. e+after[e], laid end to end.
        first = entries + 1 - (np.cumsum(after) - after)
        partner = np.arange(total) + np.repeat(first, after)
        cells = np.repeat(row * count, after) + row[partner]
        shared += np.bincount(cells, minlength=count * count).reshape(count, count)
        return shared


def _codes(labels: Sequence[str]) -> _Ints:
    """Each label as a small integer (equal labels, equal codes)."""
    number = {label: index for index, label in enumerate(dict.fromkeys(labels))}
    return np.fromiter(map(number.__getitem__, labels), dtype=np.int64, count=len(labels))


#: A word in at least this many notes of a pool is counted as a bit, not as pairs.
_COMMON_WORD_NOTES = 16
#: How many such words fit one float64-exact bitmask.
_COMMON_WORDS_MAX = 52


def _common_runs(lengths: _Ints) -> _Ints:
    """The runs (words) counted as bits: the longest, of at least _COMMON_WORD_NOTES notes."""
    if not hasattr(np, "bitwise_count"):  # numpy < 2: pairs only
        return np.zeros(0, dtype=np.int64)
    candidates = np.flatnonzero(lengths >= _COMMON_WORD_NOTES)
    if len(candidates) > _COMMON_WORDS_MAX:
        candidates = np.sort(candidates[np.argsort(-lengths[candidates], kind="stable")[:_COMMON_WORDS_MAX]])
    return candidates


def _popcount(values: npt.NDArray[np.uint64]) -> _Ints:
    counted: _Ints = np.bitwise_count(values).astype(np.int64)
    return counted
