"""The words of a pool's notes, read once per pool (the family alarm and the packer share them).

A note's words are the ``\\w+`` runs of its lower-cased text; its *content* words are
those that are not stop words. The family alarm compares every note's content words
with the question's and, for the notes it reads, with every other note's (word
Jaccard); the packer compares all the words of the notes it reaches with those already
packed. Each note text is tokenised once per process (a memo of word ids), and shared
words are counted by sorting word ids (no BLAS call, no pairwise Python loop).

Pure numpy and :mod:`re`: no I/O.
"""

from __future__ import annotations

import itertools
import os
import re
import threading
from array import array
from collections import defaultdict
from collections.abc import Sequence
from typing import Final

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
# The same keeping NUL, which joins new texts tokenised in one batch.
_ASCII_NON_WORD_TO_SPACE_KEEP_NUL = b"\x00" + _ASCII_NON_WORD_TO_SPACE[1:]
#: Up to this many question words, echo compares word ids one by one.
_FEW_WORDS = 16
#: Word ids are stored as C ints (the memo's bytes and numpy's intc agree on the layout).
_ID_TYPE: Final = "i"
_Array = npt.NDArray[np.float64]
_Ints = npt.NDArray[np.int64]
_Ids = npt.NDArray[np.intc]


def word_list(text: str) -> list[str]:
    """The ``\\w+`` runs of ``text`` lower-cased, in order (repeats kept)."""
    lowered = text.lower()
    if lowered.isascii():
        return lowered.encode("ascii").translate(_ASCII_NON_WORD_TO_SPACE).decode("ascii").split()
    return _WORD.findall(lowered)


def content_words(text: str) -> frozenset[str]:
    """Lower-cased ``\\w+`` words of ``text`` without stop words."""
    return frozenset(word_list(text)).difference(STOPWORDS)


def _word_lists(texts: Sequence[str]) -> list[list[str]]:
    """``word_list`` of each text; the ASCII ones lower-cased and mapped in one batch."""
    plain = [text for text in texts if text.isascii()]
    joined = "\x00".join(plain)
    if len(plain) < 2 or joined.count("\x00") != len(plain) - 1:
        return [word_list(text) for text in texts]
    # ASCII lower-casing is per character: the joined text splits back into each text's words.
    parts = joined.lower().encode("ascii").translate(_ASCII_NON_WORD_TO_SPACE_KEEP_NUL).decode("ascii").split("\x00")
    if len(plain) == len(texts):
        return list(map(str.split, parts))
    batch = iter(parts)
    return [next(batch).split() if text.isascii() else word_list(text) for text in texts]


#: Stop words have the first ids of every vocabulary: a word id is a content word's when it is >= this.
_FIRST_CONTENT_ID = len(STOPWORDS)
_STOPWORDS_IN_ORDER = tuple(sorted(STOPWORDS))


class _ContentIds:
    """A process-wide memo: a note text -> the ids of its distinct words.

    Notes are immutable and the same notes come back in pool after pool, so each text is
    tokenised once per process, not once per pack. A text's ids are kept as a byte
    string of C ints, so a pool's ids are one ``bytes.join`` away from a numpy array.
    Ids come from one vocabulary, which starts with the stop words (ids below
    :data:`_FIRST_CONTENT_ID`, given with the first text learnt); when the memo holds
    more than ``max_characters`` of text or ``max_words`` words, both are cleared
    together (never one without the other: a pool's ids must all come from the same
    vocabulary). The ids never reach an output:
    they only say which words are equal and which are stop words.
    """

    def __init__(self, max_characters: int = 8_000_000, max_words: int = 1 << 20) -> None:
        self.max_characters = max_characters
        self.max_words = max_words
        self._lock = threading.Lock()
        # A new word gets the next id on first lookup (the factory counts from 0 after each clear).
        self._vocabulary: defaultdict[str, int] = defaultdict(itertools.count().__next__)
        self._texts: dict[str, bytes] = {}
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
        self._vocabulary = defaultdict(itertools.count().__next__)
        self._characters = 0

    def lookup(self, texts: Sequence[str], question: frozenset[str]) -> tuple[list[bytes], list[int]]:
        """Each text's distinct word ids, and the ids of the ``question`` words seen in any text."""
        with self._lock:
            if self._characters > self.max_characters or len(self._vocabulary) > self.max_words:
                self._forget()
            known = self._texts
            found = list(map(known.get, texts))
            if None in found:
                self._learn(list(dict.fromkeys(text for text, ids in zip(texts, found, strict=True) if ids is None)))
                found = list(map(known.__getitem__, texts))
            vocabulary = self._vocabulary
            asked = [vocabulary[word] for word in question if word in vocabulary]
        return found, asked  # type: ignore[return-value]  # every text is known now

    def _learn(self, texts: list[str]) -> None:
        """Tokenise ``texts`` (new, distinct) and give their new words the next ids."""
        lookup = self._vocabulary.__getitem__  # assigns ids to new words
        if not self._vocabulary:
            list(map(lookup, _STOPWORDS_IN_ORDER))  # ids 0 .. _FIRST_CONTENT_ID - 1
        distinct = list(map(set, _word_lists(texts)))
        # Set order: ids only ever say which words are equal, never reach an output.
        ids = array(_ID_TYPE, list(map(lookup, itertools.chain.from_iterable(distinct)))).tobytes()
        size = array(_ID_TYPE).itemsize
        bounds = [size * end for end in itertools.accumulate(map(len, distinct), initial=0)]
        self._texts.update(zip(texts, map(ids.__getitem__, map(slice, bounds[:-1], bounds[1:])), strict=True))
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
        self._id_sets: dict[int, frozenset[int]] = {}
        self._question = content_words(question)
        self._per_note, self._asked = _CONTENT_IDS.lookup(texts, self._question)
        every = np.frombuffer(b"".join(self._per_note), dtype=np.intc)
        lengths = np.fromiter(map(len, self._per_note), dtype=np.int64, count=self.size) // every.itemsize
        content = every >= _FIRST_CONTENT_ID
        # One entry per (note, distinct content word), in note order.
        self.content_ids: _Ids = every[content]
        self.content_rows: _Ints = np.arange(self.size, dtype=np.int64).repeat(lengths)[content]
        self.content_sizes: _Array = np.bincount(self.content_rows, minlength=self.size).astype(np.float64)

    def words(self, row: int) -> frozenset[str]:
        """All the words of note ``row`` (stop words included)."""
        found = self._sets.get(row)
        if found is None:
            found = self._sets[row] = frozenset(word_list(self._texts[row]))
        return found

    def word_ids(self, row: int) -> frozenset[int]:
        """All the words of note ``row`` as ids: equal where :meth:`words` are, without tokenising."""
        found = self._id_sets.get(row)
        if found is None:
            found = self._id_sets[row] = frozenset(memoryview(self._per_note[row]).cast(_ID_TYPE).tolist())
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

    def nearest_duplicate(self, documents: Sequence[str], rows: Sequence[int] | _Ints | None = None) -> _Array:
        """For each note (or each of ``rows``), the highest content-word Jaccard with a note of another document."""
        return self.nearest_duplicates(documents, rows)[0]

    def nearest_duplicates(
        self,
        documents: Sequence[str],
        rows: Sequence[int] | _Ints | None = None,
        families: Sequence[str] | None = None,
    ) -> tuple[_Array, _Array]:
        """For each note (or each of ``rows``), the highest content-word Jaccard with a note of
        another document, and the same among notes of its own family (zeros without ``families``).

        Parameters
        ----------
        documents : sequence of str
            Each note's document, in candidate order.
        rows : sequence of int, optional
            The notes to measure, in the order wanted (default: all, in order). Only
            these rows of the pool-wide matrix are computed.
        families : sequence of str, optional
            Each note's family, in candidate order.
        """
        count = self.size
        if rows is None:
            rows = np.arange(count)
        if count < 2:
            return np.zeros(len(rows)), np.zeros(len(rows))
        wanted = np.zeros(count, dtype=bool)
        wanted[rows] = True
        picked = np.flatnonzero(wanted)
        position = wanted.cumsum() - 1
        shared = self._shared(picked, wanted, position)
        document = _codes(documents)
        # Notes of one document (the note itself included) are not near-duplicates: 0.
        shared *= document[picked, None] != document[None, :]
        # A note without content words shares none: counted as one word, its unions are
        # >= 1 and its Jaccards the 0 they are (other unions are >= either note's size).
        union = np.maximum(self.content_sizes[picked], 1.0)[:, None] + self.content_sizes[None, :]
        union -= shared
        jaccard = shared / union
        nearest: _Array = jaccard.max(axis=1)[position[rows]]
        if families is None:
            return nearest, np.zeros(len(rows))
        family = _codes(families)
        jaccard *= family[picked, None] == family[None, :]
        within: _Array = jaccard.max(axis=1)[position[rows]]
        return nearest, within

    def _shared(self, picked: _Ints, wanted: npt.NDArray[np.bool_], position: _Ints) -> _Ints:
        """``shared[p, j]``: how many content words note ``picked[p]`` and note j have in common."""
        count = self.size
        # Runs of one word (any order within a run: every count below is symmetric).
        order = self.content_ids.argsort()
        word = self.content_ids[order]
        row = self.content_rows[order]
        starts = np.flatnonzero(np.concatenate(([True], word[1:] != word[:-1])))
        lengths = np.diff(starts, append=len(word))
        common = _common_runs(lengths)
        paired = lengths >= 2
        bits = None
        if len(common):
            # A word in many notes (a speaker's name in every turn) would make k*k pairs:
            # such words are counted as bits instead, popcount of each pair's AND.
            bit = np.zeros(len(lengths))
            bit[common] = _POWERS[: len(common)]
            masks = np.bincount(row, weights=bit.repeat(lengths), minlength=count).astype(np.uint64)
            bits = _popcount(masks[picked, None] & masks[None, :])
            paired[common] = False
        # Every entry of a paired word in a picked note pairs with the other entries of its run.
        run_length = np.where(paired, lengths, 0).repeat(lengths)
        run_start = starts.repeat(lengths)
        entries = np.flatnonzero((run_length > 0) & wanted[row])
        partners = run_length[entries] - 1
        total = int(partners.sum())
        if total:
            # The partners of entry e are the run's entries but e, laid end to end.
            offset = np.arange(total) - (partners.cumsum() - partners).repeat(partners)
            offset += offset >= (entries - run_start[entries]).repeat(partners)
            partner = run_start[entries].repeat(partners) + offset
            cells = (position[row[entries]] * count).repeat(partners) + row[partner]
            shared: _Ints = np.bincount(cells, minlength=len(picked) * count).reshape(len(picked), count)
        else:
            shared = np.zeros((len(picked), count), dtype=np.int64)
        if bits is not None:
            shared += bits
        return shared


def _codes(labels: Sequence[str]) -> _Ints:
    """Each label as a small integer (equal labels, equal codes)."""
    number = {label: index for index, label in enumerate(dict.fromkeys(labels))}
    return np.fromiter(map(number.__getitem__, labels), dtype=np.int64, count=len(labels))


#: A word in at least this many notes of a pool is counted as a bit, not as pairs.
_COMMON_WORD_NOTES = 16
#: How many such words fit one float64-exact bitmask.
_COMMON_WORDS_MAX = 52
_POWERS = 2.0 ** np.arange(_COMMON_WORDS_MAX)  # exact: distinct powers below 2**52 add without rounding


def _common_runs(lengths: _Ints) -> _Ints:
    """The runs (words) counted as bits: the longest, of at least _COMMON_WORD_NOTES notes."""
    if not hasattr(np, "bitwise_count"):  # numpy < 2: pairs only
        return np.zeros(0, dtype=np.int64)
    candidates = np.flatnonzero(lengths >= _COMMON_WORD_NOTES)
    if len(candidates) > _COMMON_WORDS_MAX:
        candidates = np.sort(candidates[np.argsort(-lengths[candidates], kind="stable")[:_COMMON_WORDS_MAX]])
    return candidates


def _popcount(values: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint8]:
    counted: npt.NDArray[np.uint8] = np.bitwise_count(values)
    return counted
